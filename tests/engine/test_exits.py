"""Every way out of a turn after ``begin_turn`` releases the chat's lease in the same call.

Issue 12, item 1: ``aclose()`` right after the step into ``persist``, a cancellation or an
exception while the turn is being set up, a driver bug in any state, and an iterator that
is dropped and garbage-collected. After each, the turn is recorded ``aborted`` with a
documented reason, no message is ``in_progress`` and the next turn is accepted at once.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from typing import Any

import pytest

from tests.engine.support import (
    Env,
    collect,
    collected_and_closed,
    collecting_only_newer_objects,
    make_turn,
)
from turnstate.core._events import TurnAborted, TurnEvent
from turnstate.emulators._scripted import ScriptStep
from turnstate.storage import Store, TurnStatus


async def assert_released(store: Store, chat_id: str, reason: str) -> None:
    """No live lease, no in-progress message, the last turn aborted with ``reason``."""
    chat = await store.load_chat(chat_id)
    assert chat.active_turn_id is None, "the lease is still held"
    statuses = [m.status.value for m in await store.list_messages(chat_id)]
    assert "in_progress" not in statuses, statuses
    record = (await store.list_turns(chat_id, limit=1))[0]
    assert record.status == TurnStatus.ABORTED and record.reason == reason, record


async def stop_after(env: Env, stop: str, **turn: Any) -> list[TurnEvent]:
    """Consume a turn until an event of type ``stop``, then ``aclose()`` it."""
    seen: list[TurnEvent] = []
    async with aclosing(env.engine.run_turn(env.chat_id, make_turn(**turn))) as events:
        async for event in events:
            seen.append(event)
            if event.type == stop and (stop != "state_changed" or
                                       getattr(event, "dest", None) == "persist"):
                break
    return seen


async def test_aclose_right_after_entering_persist(env: Env) -> None:
    seen = await stop_after(env, "state_changed")
    assert seen[-1].dest == "persist"  # type: ignore[attr-defined]
    await assert_released(env.store, env.chat_id, "cancelled")
    assert (await env.turn("next")).committed


async def test_exception_while_the_turn_is_set_up(env: Env,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(chat_id: str) -> Any:
        raise RuntimeError("history unavailable")

    monkeypatch.setattr(env.store, "load_history", broken)
    outcome = await collect(env.engine.run_turn(env.chat_id, make_turn()))
    assert isinstance(outcome.final, TurnAborted)
    assert outcome.final.reason == "internal_error"
    assert "RuntimeError" in (outcome.final.detail or "")
    monkeypatch.undo()
    await assert_released(env.store, env.chat_id, "internal_error")
    assert (await env.turn("next")).committed


async def test_cancellation_while_the_turn_is_set_up(env: Env,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    entered, gate = asyncio.Event(), asyncio.Event()
    real = env.store.load_history

    async def slow(chat_id: str) -> Any:
        entered.set()
        await gate.wait()
        return await real(chat_id)

    monkeypatch.setattr(env.store, "load_history", slow)
    task = asyncio.ensure_future(collect(env.engine.run_turn(env.chat_id, make_turn())))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    monkeypatch.undo()
    await assert_released(env.store, env.chat_id, "cancelled")
    assert (await env.turn("next")).committed


async def test_a_driver_bug_in_a_call_state_aborts_as_internal_error(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = env.engine.adapters["openai"]

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("oops")

    monkeypatch.setattr(adapter, "envelope", broken)
    outcome = await collect(env.engine.run_turn(env.chat_id, make_turn()))
    assert isinstance(outcome.final, TurnAborted)
    assert outcome.final.reason == "internal_error"
    monkeypatch.undo()
    await assert_released(env.store, env.chat_id, "internal_error")
    assert (await env.turn("next")).committed


async def test_a_dropped_iterator_is_closed_by_the_collector(env: Env) -> None:
    gate = asyncio.Event()
    env.backend.push("openai", ScriptStep.reply("never", chunks=3, gate=gate, gate_after=1))
    with collecting_only_newer_objects():  # the iterator is made inside: still collected
        events = env.engine.run_turn(env.chat_id, make_turn())
        async for event in events:
            if event.type == "text_delta":
                break
        del events, event
        await collected_and_closed()
    await assert_released(env.store, env.chat_id, "cancelled")
    assert (await env.turn("next")).committed



async def test_a_codec_that_cannot_build_the_request_fails_the_call_saying_so(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request-building bug is a failed call (not an internal error), and its detail
    names the step that failed, not "parsing the stream"."""
    adapter = env.engine.adapters["openai"]

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("no cursor to continue from")

    monkeypatch.setattr(adapter, "build_request", broken)
    outcome = await collect(env.engine.run_turn(env.chat_id, make_turn()))
    assert isinstance(outcome.final, TurnAborted)
    assert outcome.final.reason == "provider_failed"
    assert outcome.final.detail is not None
    assert "could not build the request: ValueError" in outcome.final.detail
    monkeypatch.undo()
    await assert_released(env.store, env.chat_id, "provider_failed")


async def test_a_failed_commit_reports_a_scrubbed_bounded_detail(env: Env) -> None:
    """A store's error text can echo anything (a DSN, a key in a row): the abort's
    detail, sent to clients and stored, goes through the scrubber and is bounded."""
    from turnstate.core import StorageError
    from turnstate.engine import TurnEngine

    key = "sk-proj-" + "A1b2C3d4" * 4

    class LeakyCommits:
        def __init__(self, inner: Store) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        async def commit_turn(self, *args: Any) -> Any:
            raise StorageError(f"constraint failed near {key} " + "x" * 5000)

    engine = TurnEngine(LeakyCommits(env.store), env.engine.adapters,  # type: ignore[arg-type]
                        env.engine.transport, clock=env.clock)
    outcome = await collect(engine.run_turn(env.chat_id, make_turn()))
    assert isinstance(outcome.final, TurnAborted) and outcome.final.reason == "commit_failed"
    detail = outcome.final.detail or ""
    assert "constraint failed near" in detail and key not in detail
    assert len(detail) < 1000
    record = (await env.store.list_turns(env.chat_id, limit=1))[0]
    assert key not in (record.detail or "")
