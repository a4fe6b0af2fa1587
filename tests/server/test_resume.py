"""Turns that outlive their connection (issue 21): event ids, resume, stop, on one node.

The multi-process PostgreSQL test (``test_resume_nodes.py``) runs the same across nodes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from tests.server.support import Api, SseEvent, parse_sse, turn_body
from turnstate.emulators._base import Fault
from turnstate.server import ServerConfig


async def start(api: Api, chat_id: str, fault: Fault | None = None,
                **body: Any) -> tuple[Any, str]:
    """Start a turn (with ``fault`` on the openai emulator); the response and turn id."""
    if fault is not None:
        api.stack.emulators["openai"].faults.push(fault)
    response = await api.call("POST", f"/api/chats/{chat_id}/turns", json=turn_body(**body))
    assert response.status == 200, await response.text()
    return response, response.headers["X-Turn-Id"]


async def read_until(response: Any, kind: str) -> list[SseEvent]:
    """Read whole SSE blocks until one of event ``kind`` has arrived."""
    text = ""
    while True:
        text += (await response.content.readuntil(b"\n\n")).decode()
        events, _ = parse_sse(text)
        if events and events[-1].event == kind:
            return events


async def resume(api: Api, chat_id: str, turn_id: str, *, last: str | None = None,
                 query: str = "", owner: str = "alice", status: int = 200) -> Any:
    headers = {} if last is None else {"Last-Event-ID": last}
    response = await api.call("GET", f"/api/chats/{chat_id}/turns/{turn_id}/events{query}",
                              owner, headers=headers)
    assert response.status == status, await response.text()
    return response


async def test_every_event_carries_its_id_from_one(api: Api) -> None:
    chat_id = await api.new_chat()
    events = await api.turn(chat_id, text="hello")
    assert [e.id for e in events] == [str(i) for i in range(1, len(events) + 1)]
    assert events[-1].event == "turn_completed"


async def test_a_client_that_leaves_does_not_stop_the_turn_and_resumes_after_its_id(
        api: Api) -> None:
    """The resumed stream is exactly the events after the id: nothing lost, repeated or
    reordered against a client that never left; the turn commits once."""
    chat_id = await api.new_chat()
    await api.turn(chat_id, text="before")
    gate = asyncio.Event()
    leaving, turn_id = await start(api, chat_id, Fault(gate=gate), text="survive")
    seen = await read_until(leaving, "state_changed")
    staying = await resume(api, chat_id, turn_id, query="?after=0")
    leaving.close()  # the client goes away while the provider is still thinking
    gate.set()
    events, _ = parse_sse(await staying.text())
    resumed, _ = parse_sse(await (await resume(api, chat_id, turn_id, last=seen[-1].id)).text())
    assert [e.id for e in seen + resumed] == [e.id for e in events]
    assert seen + resumed == events and events[-1].event == "turn_completed"
    turns = await api.services.store.list_turns(chat_id)
    assert (turns[0].id, turns[0].status.value) == (turn_id, "completed")
    assert len(await api.services.store.load_history(chat_id)) == 4


async def test_resume_ids_that_are_garbage_negative_or_future_answer_400(api: Api) -> None:
    chat_id = await api.new_chat()
    events = await api.turn(chat_id, text="hello")
    turn_id = events[-1].data["turnId"]
    for last in ("abc", "-1", "1.5", "1e3", "", "9" * 30, "\u0661"):
        body = await (await resume(api, chat_id, turn_id, last=last, status=400)).json()
        assert body["error"] == "invalid_event_id" and body["field"] == "Last-Event-ID"
    body = await (await resume(api, chat_id, turn_id, query="?after=-3", status=400)).json()
    assert body["field"] == "after"
    future = str(len(events) + 1)
    body = await (await resume(api, chat_id, turn_id, last=future, status=400)).json()
    assert body["error"] == "invalid_event_id" and "beyond" in body["message"]
    done = await resume(api, chat_id, turn_id, last=str(len(events)))
    assert parse_sse(await done.text())[0] == []  # it saw the final event: nothing more


async def test_a_resume_of_an_unknown_foreign_or_misplaced_turn_answers_404(api: Api) -> None:
    chat_id = await api.new_chat()
    turn_id = (await api.turn(chat_id, text="hello"))[-1].data["turnId"]
    other_chat = await api.new_chat()
    bobs = await api.new_chat("bob")
    for chat, turn, owner in ((chat_id, "nope", "alice"), (chat_id, turn_id, "bob"),
                              (other_chat, turn_id, "alice"), (bobs, turn_id, "bob")):
        body = await (await resume(api, chat, turn, owner=owner, status=404)).json()
        assert body["error"] == "not_found"
        stop = await api.call("POST", f"/api/chats/{chat}/turns/{turn}/stop", owner)
        assert stop.status == 404


async def test_a_finished_turn_resumes_from_its_log_then_after_retention_from_its_outcome(
        api: Api) -> None:
    chat_id = await api.new_chat()
    events = await api.turn(chat_id, text="hello")
    turn_id = events[-1].data["turnId"]
    rest, _ = parse_sse(await (await resume(api, chat_id, turn_id, last="2")).text())
    assert rest == events[2:]
    await api.services.engine.detached.settled()
    api.services.engine.detached.configure(retention_seconds=0.0)
    assert await api.services.engine.detached.expire() == 1
    late, _ = parse_sse(await (await resume(api, chat_id, turn_id, last="2")).text())
    assert [e.event for e in late] == ["resume_notice", "turn_completed"]
    assert late[0].data["reason"] == "log_expired" and late[0].id is None
    assert late[1].id == events[-1].id and late[1].data["text"] == events[-1].data["text"]


async def test_stop_from_another_request_ends_the_turn_stopped_with_its_partial_text(
        api: Api) -> None:
    """Stop shows at once on the stream, the answer keeps what was streamed, the lease is
    free, and a stop of the ended turn answers 409 naming the state it ended in."""
    chat_id = await api.new_chat()
    response, turn_id = await start(api, chat_id, Fault(stall_after=6), text="long answer")
    seen = await read_until(response, "text_delta")
    stop = await api.json("POST", f"/api/chats/{chat_id}/turns/{turn_id}/stop", status=202)
    assert stop == {"turnId": turn_id, "status": "stopping"}
    rest, _ = parse_sse(await response.text())
    final = rest[-1]
    assert final.event == "turn_aborted" and final.data["reason"] == "stopped"
    assert [s["trigger"] for s in final.data["path"]][-2:] == ["stopped", "abort_recorded"]
    streamed = "".join(e.data["text"] for e in seen + rest if e.event == "text_delta")
    messages = (await api.json("GET", f"/api/chats/{chat_id}"))["messages"]
    assert messages[-1]["status"] == "aborted" and streamed
    assert messages[-1]["parts"] == [{"type": "text", "text": streamed}]
    again = await api.json("POST", f"/api/chats/{chat_id}/turns/{turn_id}/stop", status=409)
    assert again["error"] == "turn_finished" and again["state"] == "aborted"
    assert again["reason"] == "stopped"
    assert (await api.turn(chat_id, text="next"))[-1].event == "turn_completed"
    done_id = (await api.services.store.list_turns(chat_id))[0].id
    done = await api.json("POST", f"/api/chats/{chat_id}/turns/{done_id}/stop", status=409)
    assert done["state"] == "done" and done["reason"] is None


async def test_a_busy_chat_names_its_running_turn(api: Api) -> None:
    chat_id = await api.new_chat()
    gate = asyncio.Event()
    response, turn_id = await start(api, chat_id, Fault(gate=gate))
    await read_until(response, "state_changed")
    view = await api.json("GET", f"/api/chats/{chat_id}")
    listed = (await api.json("GET", "/api/chats"))["chats"][0]
    assert view["busy"] and view["activeTurnId"] == turn_id == listed["activeTurnId"]
    gate.set()
    await response.text()
    assert (await api.json("GET", f"/api/chats/{chat_id}"))["activeTurnId"] is None


@pytest.mark.parametrize("config", [ServerConfig(max_streams_per_owner=501)])
async def test_five_hundred_concurrent_resumes_of_one_turn_get_the_same_events(
        api: Api) -> None:
    chat_id = await api.new_chat()
    gate = asyncio.Event()
    response, turn_id = await start(api, chat_id, Fault(gate=gate), text="popular")
    seen = await read_until(response, "state_changed")
    url = api.client.make_url(f"/api/chats/{chat_id}/turns/{turn_id}/events")
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     headers=api.headers()) as http:
        streams = await asyncio.gather(*(http.get(url) for _ in range(500)))
        assert {s.status for s in streams} == {200}
        assert len(api.services.turn_tasks) == 501  # every stream is open at once
        gate.set()
        bodies = await asyncio.gather(*(s.text() for s in streams))
    original = seen + parse_sse(await response.text())[0]
    assert original[-1].event == "turn_completed"
    assert all(parse_sse(body)[0] == original for body in bodies)
    assert api.services.turn_tasks == set()


@pytest.mark.parametrize("config", [ServerConfig(heartbeat_seconds=10.0)])
async def test_a_stop_racing_the_commit_ends_as_exactly_one_outcome(api: Api) -> None:
    """Stops sent at every point of many turns: each turn ends completed or stopped, its
    stream says the same as the store, and never both."""
    chat_id = await api.new_chat()
    outcomes = set()
    for delay_steps in range(12):
        response, turn_id = await start(api, chat_id, text=f"race {delay_steps}")
        for _ in range(delay_steps):
            await asyncio.sleep(0)  # a different point of the turn each round
        stop = await api.call("POST", f"/api/chats/{chat_id}/turns/{turn_id}/stop")
        events, _ = parse_sse(await response.text())
        record = await api.services.store.load_turn(turn_id)
        final = events[-1]
        if record.status.value == "completed":
            assert final.event == "turn_completed" and stop.status in (202, 409)
        else:
            assert record.reason == "stopped" and final.data["reason"] == "stopped"
            assert stop.status == 202
        assert sum(e.event in ("turn_completed", "turn_aborted") for e in events) == 1
        outcomes.add(record.status.value)
    chat = await api.services.store.load_chat(chat_id)
    assert chat.active_turn_id is None
    assert "aborted" in outcomes  # the early stops did stop (the late ones may not)
