"""The resume route on a turn an embedder iterates with ``run_turn`` on the server's
engine (helper "resume4"): ``follow`` now gives such a turn's live events with the
notice ``not_logged``, which the route sends as a ``resume_notice`` (a notice it had
no text for would have failed the stream)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from tests.server.support import Api, parse_sse, turn_body
from turnstate.emulators._base import Fault
from turnstate.engine import TurnInput, _follow


async def test_a_resume_of_an_attached_turn_sends_its_notice_then_its_live_events(
        api: Api) -> None:
    chat_id = await api.new_chat()
    gate = asyncio.Event()
    api.stack.emulators["openai"].faults.push(Fault(gate=gate))
    body = turn_body("wait")
    turn = TurnInput(provider=body["provider"], model=body["model"], turn_id="t-embedded",
                     user_text="wait", owner="alice", system_prompt="Be terse.")
    events = api.services.engine.run_turn(chat_id, turn)
    seen: list[str] = []
    first = asyncio.Event()

    async def consume() -> None:
        async with contextlib.aclosing(events) as iterator:
            async for event in iterator:
                seen.append(event.type)
                first.set()

    consumer = asyncio.create_task(consume())
    await first.wait()
    path = f"/api/chats/{chat_id}/turns/t-embedded/events"
    response = await api.call("GET", path)
    assert response.status == 200
    gate.set()  # the notice goes out with the first batch
    rest, _ = parse_sse(await response.text())
    await consumer
    assert rest[0].event == "resume_notice"
    assert rest[0].data["reason"] == "not_logged"
    rest = rest[1:]
    assert rest[-1].event == "turn_completed", rest[-1].data
    assert [e.event for e in rest] == seen[len(seen) - len(rest):]


async def test_a_resume_of_an_ended_attached_turn_says_its_events_were_not_logged(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the embedder's turn ended, its log holds nothing: the route sends the notice
    ``not_logged`` and the end rebuilt from the store (id 999999999), on the server's
    store (SQLite). Before, no notice (follow7)."""
    monkeypatch.setattr(_follow, "FINAL_GRACE_SECONDS", 0.05)  # nobody logs its end
    chat_id = await api.new_chat()
    body = turn_body("hello")
    turn = TurnInput(provider=body["provider"], model=body["model"], turn_id="t-ended",
                     user_text="hello", owner="alice", system_prompt="Be terse.")
    async with contextlib.aclosing(api.services.engine.run_turn(chat_id, turn)) as events:
        seen = [event async for event in events]
    response = await api.call("GET", f"/api/chats/{chat_id}/turns/t-ended/events")
    assert response.status == 200
    rest, _ = parse_sse(await response.text())
    assert [e.event for e in rest] == ["resume_notice", seen[-1].type]
    assert rest[0].data["reason"] == "not_logged"
    assert rest[1].id == "999999999"
