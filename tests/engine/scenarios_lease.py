"""Engine scenarios for issue 20: ``lease_lost`` from every working state (the lease is
released under the running turn, its next renewal is refused, and it stops before its
next side effect), and ``storage_failed`` from every state that reads or writes the store
outside the commit. Registered in ``SCENARIOS`` like the others."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import aclosing, contextmanager
from typing import Any

from tests.engine.outage_lease import OUTAGE_LEASE, outage_lease, patient
from tests.engine.scenarios import scenario, set_raw_state
from tests.engine.support import Env, Outcome, broken, make_turn, tool
from turnstate.core._errors import LeaseLost, StorageError, StorageUnavailable
from turnstate.emulators._scripted import ScriptStep
from turnstate.storage import TurnLease, TurnStatus, release_chat


@contextmanager
def beating(env: Env, seconds: float = 0.001) -> Iterator[asyncio.Event]:
    """A fast heartbeat; the event is set once a renewal was refused."""
    refused = asyncio.Event()
    renew = env.store.renew_lease

    async def watched(lease: TurnLease, lease_seconds: float) -> Any:
        try:
            return await renew(lease, lease_seconds)
        except LeaseLost:
            refused.set()
            raise

    before = env.engine.heartbeat_seconds
    env.engine.heartbeat_seconds = seconds
    try:
        with broken(env.store, "renew_lease", watched):
            yield refused
    finally:
        env.engine.heartbeat_seconds = before


async def lose_lease_at(env: Env, marker: str, text: str, ran: list[str] | None = None,
                        **kwargs: Any) -> Outcome:
    """Run a turn; at the first event whose ``dest`` (or ``type``) is ``marker``, release
    the chat under it and wait until the heartbeat's renewal was refused."""
    events = []
    with beating(env) as refused:
        stream = env.engine.run_turn(env.chat_id, make_turn(text, **kwargs))
        async with aclosing(stream) as turn_events:
            async for event in turn_events:
                events.append(event)
                if marker in (getattr(event, "dest", None), event.type) \
                        and not refused.is_set():
                    requests, tools_run = len(env.backend.requests), len(ran or [])
                    assert (await release_chat(env.store, env.chat_id)) is not None
                    await refused.wait()
    outcome = Outcome(events=tuple(events))
    env.outcomes.append(outcome)
    assert outcome.final.reason == "lease_lost", outcome.final  # type: ignore[union-attr]
    assert outcome.path[-2].trigger == "lease_lost"
    # Nothing was sent or run after the loss.
    assert len(env.backend.requests) == requests and len(ran or []) == tools_run
    record = (await env.store.list_turns(env.chat_id, limit=1))[0]
    assert record.status is TurnStatus.ABORTED and record.reason == "released", record
    assert (await env.store.load_chat(env.chat_id)).active_turn_id is None
    return outcome


@scenario
async def lease_lost_in_every_state(env: Env) -> None:
    """The lease released under a turn in each working state: the turn stops at its
    next step with ``lease_lost``, sends nothing more and runs no tool."""
    assert (await env.turn("warm")).committed
    await lose_lease_at(env, "cursor", "a")
    await lose_lease_at(env, "replay", "b", model="gpt-4.1")  # a changed model replays
    ran: list[str] = []

    async def counted(args: dict[str, Any]) -> Any:
        ran.append("weather")
        return "sunny"

    env.backend.push("anthropic", ScriptStep.call(("weather", {"city": "Oslo"})))
    await lose_lease_at(env, "tool_iteration", "c", ran, provider="anthropic",
                        model="claude-sonnet-4-5", tools=(tool("weather", counted),))
    assert ran == []
    await lose_lease_at(env, "local_loop", "d", provider="anthropic", model="claude-sonnet-4-5")
    await lose_lease_at(env, "persist", "e")
    await set_raw_state(env, "{not json")
    await lose_lease_at(env, "continuation_degraded", "f")  # in validate, before its write
    assert (await env.turn("g")).committed


async def _storage_failed(env: Env, source: str, text: str, **kwargs: Any) -> None:
    outcome = await env.turn(text, **kwargs)
    assert outcome.final.reason == "storage_failed", outcome.final  # type: ignore[union-attr]
    assert outcome.path[-2].source == source, outcome.path
    assert (await env.store.load_chat(env.chat_id)).active_turn_id is None


async def _down(*args: Any, **kwargs: Any) -> Any:
    msg = "the database went away"
    raise StorageUnavailable(msg)


async def _corrupt(*args: Any, **kwargs: Any) -> Any:
    msg = "a row the store cannot read"
    raise StorageError(msg)


@scenario
async def storage_failed_in_every_state(env: Env) -> None:
    """A store failure after the turn began is ``storage_failed``, not an internal error.
    A store that stays away is waited for while the turn's patience lasts (a short lease
    here: ``outage_lease``); one that refuses (not an outage) ends the turn at once."""
    with broken(env.store, "load_history", _down), outage_lease(env) as took:
        await _storage_failed(env, "replay", "a")
    assert patient(took), took
    with broken(env.store, "load_history", _corrupt), outage_lease(env) as took:
        await _storage_failed(env, "local_loop", "b", provider="anthropic",
                              model="claude-sonnet-4-5")
    assert took.seconds < OUTAGE_LEASE / 2, took
    assert (await env.turn("c")).committed
    with broken(env.store, "record_transition", _down):
        await _storage_failed(env, "validate", "d", model="gpt-4.1")
    assert (await env.turn("e")).committed
    env.backend.push("openai", ScriptStep.reject_cursor("cursor_expired"))
    with broken(env.store, "record_transition", _down):
        await _storage_failed(env, "cursor", "f")
    assert (await env.turn("g")).committed
