"""Stop under attack: every way a client can ask a turn to stop gets a clear answer.

Twice at once and again after, during a running tool call, right after the turn ended,
for another owner's turn, another chat's, an unknown id, then a resume of the stopped
stream: each answers a typed error or the same success, the chat ends consistent (no
lease held, the partial answer kept as the aborted message) and nothing keeps running.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.server.support import Api, parse_sse
from tests.server.test_resume import read_until, resume, start
from turnstate.core._conversation import Tool, ToolSpec
from turnstate.core._errors import TurnFinished, TurnNotFound
from turnstate.emulators._base import Fault
from turnstate.server import ServerConfig

WAIT = 20.0  # a stop that does not end the turn fails the test instead of hanging it


def stop_path(chat_id: str, turn_id: str) -> str:
    return f"/api/chats/{chat_id}/turns/{turn_id}/stop"


async def assert_settled(api: Api, chat_id: str) -> None:
    """The chat is free, no stream task is left and the engine runs no turn any more."""
    assert (await api.services.store.load_chat(chat_id)).active_turn_id is None
    detached = api.services.engine.detached
    await asyncio.wait_for(detached.settled(), WAIT)
    assert detached.live == {}
    assert api.services.turn_tasks == set()


async def test_two_stops_at_once_and_a_third_after_end_the_turn_once(api: Api) -> None:
    chat_id = await api.new_chat()
    response, turn_id = await start(api, chat_id, Fault(stall_after=6), text="long answer")
    seen = await read_until(response, "text_delta")
    answers = await asyncio.gather(*(api.call("POST", stop_path(chat_id, turn_id))
                                     for _ in range(2)))
    bodies = [await a.json() for a in answers]
    assert answers[0].status == 202 or answers[1].status == 202, bodies
    for answer, body in zip(answers, bodies, strict=True):  # the later one may find it ended
        assert (answer.status, body) in ((202, {"turnId": turn_id, "status": "stopping"}),
                                         (409, {"error": "turn_finished", "state": "aborted",
                                                "reason": "stopped", "message": body.get(
                                                    "message")}))
    rest, _ = parse_sse(await asyncio.wait_for(response.text(), WAIT))
    finals = [e for e in seen + rest if e.event in ("turn_completed", "turn_aborted")]
    assert [(e.event, e.data["reason"]) for e in finals] == [("turn_aborted", "stopped")]
    third = await api.json("POST", stop_path(chat_id, turn_id), status=409)
    assert (third["state"], third["reason"]) == ("aborted", "stopped")
    record = await api.services.store.load_turn(turn_id)
    assert (record.status.value, record.reason) == ("aborted", "stopped")
    await assert_settled(api, chat_id)
    streamed = "".join(e.data["text"] for e in seen + rest if e.event == "text_delta")
    messages = (await api.json("GET", f"/api/chats/{chat_id}"))["messages"]
    assert messages[-1]["status"] == "aborted"
    assert messages[-1]["parts"] == [{"type": "text", "text": streamed}]
    assert (await api.turn(chat_id, text="next"))[-1].event == "turn_completed"


async def test_a_stop_during_a_running_tool_call_cancels_it_and_frees_the_chat(
        api: Api) -> None:
    called, cancelled = asyncio.Event(), asyncio.Event()

    async def slow(args: dict[str, Any]) -> dict[str, Any]:
        called.set()
        try:
            await asyncio.Event().wait()  # never answers by itself
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return {}  # pragma: no cover

    api.services.tools["slow"] = Tool(spec=ToolSpec(
        name="slow", description="Never answers", parameters={"type": "object",
                                                               "properties": {}}),
        handler=slow, timeout=600.0)
    chat_id = await api.new_chat()
    response, turn_id = await start(api, chat_id, text="[[call:slow {}]] go",
                                    tools=["slow"])
    await asyncio.wait_for(called.wait(), WAIT)
    await api.json("POST", stop_path(chat_id, turn_id), status=202)
    events, _ = parse_sse(await asyncio.wait_for(response.text(), WAIT))
    assert events[-1].event == "turn_aborted" and events[-1].data["reason"] == "stopped"
    assert cancelled.is_set()  # the handler did not outlive its turn
    await assert_settled(api, chat_id)
    assert (await api.turn(chat_id, text="next"))[-1].event == "turn_completed"


async def test_a_stop_right_after_the_end_is_told_the_outcome(api: Api) -> None:
    chat_id = await api.new_chat()
    await api.turn(chat_id, text="quick")
    turn_id = (await api.services.store.list_turns(chat_id))[0].id
    done = await api.json("POST", stop_path(chat_id, turn_id), status=409)
    assert (done["error"], done["state"], done["reason"]) == ("turn_finished", "done", None)
    record = await api.services.store.load_turn(turn_id)
    assert record.status.value == "completed"
    await assert_settled(api, chat_id)


@pytest.mark.parametrize("who", ["another owner", "another chat", "unknown id",
                                 "unknown chat", "odd id"])
async def test_a_stop_that_names_no_turn_of_the_caller_is_not_found_and_stops_nothing(
        api: Api, who: str) -> None:
    chat_id = await api.new_chat()
    other_chat = await api.new_chat()
    gate = asyncio.Event()
    response, turn_id = await start(api, chat_id, Fault(gate=gate), text="mine")
    await read_until(response, "state_changed")
    owner, path = {
        "another owner": ("bob", stop_path(chat_id, turn_id)),
        "another chat": ("alice", stop_path(other_chat, turn_id)),
        "unknown id": ("alice", stop_path(chat_id, "no-such-turn")),
        "unknown chat": ("alice", stop_path("no-such-chat", turn_id)),
        "odd id": ("alice", stop_path(chat_id, "x" * 5000 + "%00%F0%9F%98%80")),
    }[who]
    refused = await api.json("POST", path, owner=owner, status=404)
    assert refused["error"] == "not_found"
    gate.set()
    events, _ = parse_sse(await asyncio.wait_for(response.text(), WAIT))
    assert events[-1].event == "turn_completed"
    await assert_settled(api, chat_id)


async def test_the_engine_refuses_the_same_stops_with_typed_errors(api: Api) -> None:
    engine = api.services.engine
    chat_id = await api.new_chat()
    await api.turn(chat_id, text="quick")
    turn_id = (await api.services.store.list_turns(chat_id))[0].id
    with pytest.raises(TurnNotFound):
        await engine.stop("no-such-turn")
    with pytest.raises(TurnNotFound):
        await engine.stop(turn_id, owner="bob")
    with pytest.raises(TurnFinished) as ended:
        await engine.stop(turn_id, owner="alice")
    assert ended.value.state == "done"


async def test_a_stopped_stream_resumes_to_its_stopped_end(api: Api) -> None:
    """After a stop, a resume from the last event seen gets the rest and the same final
    event; a resume from the start gets the whole stream; the UI resume URL, no turn."""
    chat_id = await api.new_chat()
    response, turn_id = await start(api, chat_id, Fault(stall_after=6), text="long answer")
    seen = await read_until(response, "text_delta")
    await api.json("POST", stop_path(chat_id, turn_id), status=202)
    rest, _ = parse_sse(await asyncio.wait_for(response.text(), WAIT))
    whole = seen + rest
    resumed, _ = parse_sse(await (await resume(api, chat_id, turn_id,
                                               last=seen[-1].id)).text())
    assert resumed == rest
    again, _ = parse_sse(await (await resume(api, chat_id, turn_id)).text())
    assert again == whole
    ui = await api.call("GET", f"/api/ui-messages/{chat_id}/stream")
    assert ui.status == 204
    await assert_settled(api, chat_id)


async def test_a_stopped_ui_stream_ends_with_abort_and_a_regenerate_replaces_it(
        api: Api) -> None:
    """The AI SDK route: a stop ends its stream with ``abort`` and ``[DONE]``, its resume
    URL then answers 204, and a regenerate asks the stopped question again in its place
    (the partial answer goes with it)."""
    chat_id = await api.new_chat()
    api.stack.emulators["openai"].faults.push(Fault(stall_after=6))
    response = await api.call("POST", "/api/ui-messages", json={
        "id": chat_id, "trigger": "submit-message", "provider": "openai", "model": "gpt-4o",
        "messages": [{"role": "user", "parts": [{"type": "text", "text": "long answer"}]}]})
    assert response.status == 200, await response.text()
    text = ""
    while '"text-delta"' not in text:
        text += (await response.content.readuntil(b"\n\n")).decode()
    turn_id = json.loads(text.split("data: ", 2)[1].split("\n", 1)[0])["messageId"]
    await api.json("POST", stop_path(chat_id, turn_id), status=202)
    text += await asyncio.wait_for(response.text(), WAIT)
    assert text.rstrip().endswith("data: [DONE]")
    assert '{"type":"abort"' in text.replace(" ", "")
    assert (await api.call("GET", f"/api/ui-messages/{chat_id}/stream")).status == 204
    await assert_settled(api, chat_id)
    again = await api.call("POST", "/api/ui-messages", json={
        "id": chat_id, "trigger": "regenerate-message", "messages": [],
        "provider": "openai", "model": "gpt-4o"})
    assert again.status == 200, await again.text()
    await again.text()
    listed = await api.services.store.list_messages(chat_id)
    assert [(m.seq, m.status.value) for m in listed] == [(1, "completed"), (2, "completed")]
    assert listed[0].text() == "long answer"
    await assert_settled(api, chat_id)


@pytest.mark.parametrize("config", [ServerConfig(cancel_on_disconnect=True)])
async def test_a_stop_and_a_leaving_client_at_once_end_the_turn_once(api: Api) -> None:
    """With ``--cancel-on-disconnect``, a stop and the client leaving at the same moment:
    the turn ends aborted once (stopped or cancelled), the chat free, nothing running."""
    chat_id = await api.new_chat()
    response, turn_id = await start(api, chat_id, Fault(stall_after=6), text="long answer")
    await read_until(response, "text_delta")
    stop = asyncio.ensure_future(api.call("POST", stop_path(chat_id, turn_id)))
    response.close()
    assert (await asyncio.wait_for(stop, WAIT)).status in (202, 409)
    await assert_settled(api, chat_id)
    record = await api.services.store.load_turn(turn_id)
    assert record.status.value == "aborted" and record.reason in ("stopped", "cancelled")
    replay, _ = parse_sse(await (await resume(api, chat_id, turn_id)).text())
    finals = [e for e in replay if e.event in ("turn_completed", "turn_aborted")]
    assert [(e.event, e.data["reason"]) for e in finals] == [("turn_aborted", record.reason)]
    assert (await api.turn(chat_id, text="next"))[-1].event == "turn_completed"
