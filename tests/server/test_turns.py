"""Turns over SSE: event names, tool loops, busy chats, disconnects, heartbeats, metrics."""

from __future__ import annotations

import asyncio

import pytest

from tests.server.support import Api, parse_sse, turn_body
from turnstate.emulators._base import Fault
from turnstate.server import ServerConfig

ENGINE_TYPES = {"state_changed", "continuation_degraded", "fallback_notice", "text_delta",
                "reasoning_delta", "tool_call", "tool_result", "context_snapshot",
                "turn_completed", "turn_aborted"}


async def test_sse_event_names_are_the_engine_event_types(api: Api) -> None:
    chat_id = await api.new_chat()
    events = await api.turn(chat_id, text="[[think]] [[call:calculator]] sum it",
                            tools=["calculator"], provider="deepseek",
                            model="deepseek-reasoner")
    assert all(e.event == e.data["type"] for e in events)
    assert {e.event for e in events} <= ENGINE_TYPES
    names = [e.event for e in events]
    assert names[0] == "state_changed" and names[-1] == "turn_completed"
    assert {"text_delta", "reasoning_delta", "tool_call", "tool_result",
            "context_snapshot"} <= set(names)
    text = "".join(e.data["text"] for e in events if e.event == "text_delta")
    assert text == events[-1].data["text"]
    assert events[-1].data["stats"]["requestBytes"] > 0


async def test_a_busy_chat_answers_409_before_any_provider_call(api: Api) -> None:
    chat_id = await api.new_chat()
    gate = asyncio.Event()
    emulator = api.stack.emulators["openai"]
    emulator.faults.push(Fault(gate=gate))
    first = await api.call("POST", f"/api/chats/{chat_id}/turns", json=turn_body("slow"))
    assert first.status == 200
    await first.content.readuntil(b"\n\n")  # the turn holds the lease now
    busy = await api.json("POST", f"/api/chats/{chat_id}/turns", json=turn_body("again"),
                          status=409)
    assert busy["error"] == "chat_busy"
    assert (await api.call("DELETE", f"/api/chats/{chat_id}")).status == 409
    gate.set()
    events, _ = parse_sse(await first.text())
    assert events[-1].event == "turn_completed"
    assert [b"again" in r.body for r in emulator.requests] == [False]


@pytest.mark.parametrize("config", [ServerConfig(cancel_on_disconnect=True)])
async def test_with_cancel_on_disconnect_a_client_that_leaves_aborts_its_turn(
        api: Api) -> None:
    """``serve --cancel-on-disconnect``: the behaviour before detached turns (issue 21)."""
    chat_id = await api.new_chat()
    await api.turn(chat_id, text="committed before")
    gate = asyncio.Event()
    api.stack.emulators["openai"].faults.push(Fault(gate=gate))
    response = await api.call("POST", f"/api/chats/{chat_id}/turns", json=turn_body("cut"))
    await response.content.readuntil(b"\n\n")
    (task,) = api.services.turn_tasks
    response.close()  # the client goes away while the provider is still thinking
    await asyncio.gather(task, return_exceptions=True)
    await api.services.engine.detached.settled()
    gate.set()
    store = api.services.store
    chat = await store.load_chat(chat_id)
    assert chat.active_turn_id is None
    turns = await store.list_turns(chat_id)
    assert turns[0].status == "aborted" and turns[0].reason == "cancelled"
    statuses = [m.status.value for m in await store.list_messages(chat_id)]
    assert statuses == ["completed", "completed", "aborted", "aborted"]
    assert api.services.turn_tasks == set()
    events = await api.turn(chat_id, text="next")  # the chat takes the next turn at once
    assert events[-1].event == "turn_completed"
    assert events[-1].data["strategy"] == "cursor"  # the cursor survived the abort


@pytest.mark.parametrize("config", [ServerConfig(heartbeat_seconds=0.05)])
async def test_an_idle_stream_gets_heartbeat_comments(api: Api) -> None:
    chat_id = await api.new_chat()
    gate = asyncio.Event()
    api.stack.emulators["openai"].faults.push(Fault(gate=gate))
    response = await api.call("POST", f"/api/chats/{chat_id}/turns", json=turn_body())
    await response.content.readuntil(b"\n\n")
    comment = await response.content.readuntil(b"\n\n")
    assert comment.startswith(b": ping")
    gate.set()
    events, _ = parse_sse(await response.text())
    assert events[-1].event == "turn_completed"


async def test_an_expired_cursor_degrades_with_a_notice_and_recovers(api: Api) -> None:
    chat_id = await api.new_chat()
    await api.turn(chat_id, text="one")
    expired = await api.json("POST", "/api/emulator/expire-cursor", json={"chat_id": chat_id})
    assert expired == {"expired": True, "provider": "openai"}
    events = await api.turn(chat_id, text="two")
    notice = next(e.data for e in events if e.event == "fallback_notice")
    assert notice["reason"] == "cursor_expired"
    assert events[-1].data["degradation"] == "cursor_expired"
    assert (await api.turn(chat_id, text="three"))[-1].data["strategy"] == "cursor"
    view = await api.json("GET", f"/api/chats/{chat_id}")
    assert view["messages"][3]["turn"]["degradation"] == "cursor_expired"


async def test_a_changed_system_prompt_is_announced(api: Api) -> None:
    chat_id = await api.new_chat()
    await api.turn(chat_id, text="one", system_prompt="Be terse.")
    events = await api.turn(chat_id, text="two", system_prompt="Be verbose.")
    assert [e.data["reason"] for e in events if e.event == "fallback_notice"] == \
        ["system_prompt_changed"]


async def test_an_injected_provider_failure_aborts_the_turn(api: Api) -> None:
    chat_id = await api.new_chat()
    queued = await api.json("POST", "/api/emulator/faults",
                            json={"provider": "anthropic", "kind": "error"})
    assert queued["pending"] == 1
    events = await api.turn(chat_id, provider="anthropic", model="claude-sonnet-4-5")
    assert events[-1].event == "turn_aborted"
    assert events[-1].data["reason"] == "provider_failed"
    assert (await api.turn(chat_id, provider="anthropic", model="claude-sonnet-4-5"))[-1] \
        .event == "turn_completed"
    for body in ({"provider": "nope", "kind": "error"}, {"provider": "openai", "kind": "x"},
                 {"provider": "openai", "kind": "stall", "seconds": -1}):
        await api.json("POST", "/api/emulator/faults", json=body, status=400)
    fresh = await api.new_chat()
    assert (await api.json("POST", "/api/emulator/expire-cursor", json={"chat_id": fresh},
                           status=409))["error"] == "no_cursor"


async def test_metrics_count_turns_degradations_bytes_and_streams(api: Api) -> None:
    chat_id = await api.new_chat()
    await api.turn(chat_id, text="one")
    await api.turn(chat_id, text="two", system_prompt="changed")
    text = await (await api.client.get("/metrics")).text()
    assert 'turnstate_turns_total{outcome="completed",strategy="replay"} 2.0' in text
    assert 'turnstate_degradations_total{reason="system_prompt_changed"} 1.0' in text
    assert 'turnstate_provider_requests_total{provider="openai"} 2.0' in text
    assert "turnstate_turn_seconds_count 2.0" in text
    assert "turnstate_sse_streams_active 0.0" in text
    assert "turnstate_provider_request_bytes_total" in text


async def test_healthz_reports_an_unreachable_store(api: Api) -> None:
    assert await (await api.client.get("/healthz")).json() == {"status": "ok"}

    async def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk gone")

    api.services.engine.store.list_chats = broken  # type: ignore[method-assign]
    response = await api.client.get("/healthz")
    assert response.status == 503
    assert await response.json() == {"status": "unavailable"}
