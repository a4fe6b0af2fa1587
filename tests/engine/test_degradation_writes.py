"""A degradation's write gets the commit's treatment (issue 20): a lost reply is read back.

The write appends a transition part to the turn's in-progress answer, so it must land
exactly once: a reply lost after the write landed carries on, a write that failed before
landing is sent again, and a store that stays down still ends the turn ``storage_failed``.
The answer is looked at just before the commit (the commit replaces its parts, so only
the in-progress answer shows a part appended twice).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest

from tests.engine.support import Env, Outcome, broken
from turnstate.core._conversation import TransitionPart
from turnstate.core._errors import StorageUnavailable
from turnstate.emulators._scripted import ScriptStep
from turnstate.engine._writes import TRANSITION_WRITES
from turnstate.storage import TurnStatus

_LEASE = 1.2
"""Longer than the read-back's largest backoff (1 s): with a renewing heartbeat, a budget
taken from the live lease would never run out."""

SOURCES = ["validate", "cursor"]  # a changed model at validation; a cursor the provider lost


async def _degraded_turn(env: Env, source: str) -> Outcome:
    """A second turn that degrades from ``source`` (the first one commits a cursor)."""
    if source == "validate":
        return await env.turn("two", model="gpt-4.1")
    env.backend.push("openai", ScriptStep.reject_cursor("cursor_expired"),
                     ScriptStep.reply("fine"))
    return await env.turn("two")


@contextmanager
def _transitions(env: Env, write: Any) -> Iterator[list[tuple[TransitionPart, ...]]]:
    """``record_transition`` replaced by ``write(real, *args)``; yields the transition
    parts the in-progress answer held when each commit was sent."""
    real, commit = env.store.record_transition, env.store.commit_turn
    seen: list[tuple[TransitionPart, ...]] = []

    async def writing(*args: Any, **kwargs: Any) -> Any:
        return await write(real, *args, **kwargs)

    async def committing(lease: Any, record: Any) -> Any:
        answer = next(m for m in await env.store.list_messages(env.chat_id)
                      if m.id == lease.assistant_message_id)
        seen.append(tuple(p for p in answer.parts if isinstance(p, TransitionPart)))
        return await commit(lease, record)

    with ExitStack() as stack:
        stack.enter_context(broken(env.store, "record_transition", writing))
        stack.enter_context(broken(env.store, "commit_turn", committing))
        yield seen


def _stored_transitions(parts: tuple[Any, ...]) -> list[tuple[str, bool]]:
    return [(p.reason, p.recovered) for p in parts if isinstance(p, TransitionPart)]


@pytest.mark.parametrize("source", SOURCES)
async def test_a_degradation_write_whose_reply_was_lost_is_not_sent_again(
        env: Env, source: str) -> None:
    """The write lands, then the connection drops: the turn reads its answer back,
    finds the part, and carries on (a blind retry would append it twice)."""
    await env.turn("one")
    sent: list[object] = []

    async def reply_lost(real: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(args)
        await real(*args, **kwargs)
        msg = "connection lost after the statement was sent"
        raise StorageUnavailable(msg)

    with _transitions(env, reply_lost) as at_commit:
        outcome = await _degraded_turn(env, source)
    assert outcome.committed, outcome.final
    assert len(sent) == 1 and len(at_commit) == 1 and len(at_commit[0]) == 1
    reason = outcome.final.degradation
    history = await env.store.load_history(env.chat_id)
    assert _stored_transitions(history[-1].parts) == [(reason, True)]


@pytest.mark.parametrize("source", SOURCES)
async def test_a_degradation_write_that_did_not_land_is_sent_again_once(
        env: Env, source: str) -> None:
    """The store fails before writing (a restart): the read shows nothing landed, so the
    write is sent again, and the answer holds the part exactly once."""
    await env.turn("one")
    sent: list[object] = []

    async def down_once(real: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(args)
        if len(sent) == 1:
            msg = "the database restarts"
            raise StorageUnavailable(msg)
        return await real(*args, **kwargs)

    with _transitions(env, down_once) as at_commit:
        outcome = await _degraded_turn(env, source)
    assert outcome.committed, outcome.final
    assert len(sent) == 2 and len(at_commit) == 1 and len(at_commit[0]) == 1
    history = await env.store.load_history(env.chat_id)
    assert _stored_transitions(history[-1].parts) == [(outcome.final.degradation, True)]


@pytest.mark.parametrize("source", SOURCES)
async def test_a_degradation_write_that_never_lands_is_storage_failed(
        env: Env, source: str) -> None:
    """The write fails every time while reads work: it is sent a bounded number of
    times, each only after a read showed the previous one did not land."""
    await env.turn("one")
    sent: list[object] = []

    async def down(real: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(args)
        msg = "the database went away"
        raise StorageUnavailable(msg)

    with _transitions(env, down) as at_commit:
        outcome = await _degraded_turn(env, source)
    assert outcome.final.reason == "storage_failed", outcome.final  # type: ignore[union-attr]
    assert len(sent) == TRANSITION_WRITES and at_commit == []
    assert (await env.store.load_chat(env.chat_id)).active_turn_id is None
    record = (await env.store.list_turns(env.chat_id))[0]
    assert record.status is TurnStatus.ABORTED and record.reason == "storage_failed"


async def test_a_store_that_stays_down_ends_the_turn_within_the_lease(env: Env) -> None:
    """Neither the write nor the read-back reach the store, while the heartbeat still
    renews: the read-back gives up once the lease it started under runs out, instead of
    being kept alive by each renewal, and the turn ends ``storage_failed``."""
    await env.turn("one")
    env.engine.lease_seconds, env.engine.heartbeat_seconds = _LEASE, 0.05

    async def down(*args: Any, **kwargs: Any) -> Any:
        msg = "the database went away"
        raise StorageUnavailable(msg)

    with broken(env.store, "record_transition", down), \
            broken(env.store, "list_messages", down):
        async with asyncio.timeout(8):
            outcome = await env.turn("two", model="gpt-4.1")
    assert outcome.final.reason == "storage_failed", outcome.final  # type: ignore[union-attr]
    assert (await env.store.load_chat(env.chat_id)).active_turn_id is None


async def test_a_commit_read_back_that_never_succeeds_ends_within_the_lease(
        env: Env) -> None:
    """The same bound for a commit whose reply was lost: with ``load_turn`` failing and
    the heartbeat renewing, the turn ends ``commit_failed`` instead of waiting for ever."""
    env.engine.lease_seconds, env.engine.heartbeat_seconds = _LEASE, 0.05

    async def down(*args: Any, **kwargs: Any) -> Any:
        msg = "the database went away"
        raise StorageUnavailable(msg)

    with broken(env.store, "commit_turn", down), broken(env.store, "load_turn", down):
        async with asyncio.timeout(8):
            outcome = await env.turn("one")
    assert outcome.final.reason == "commit_failed", outcome.final  # type: ignore[union-attr]
    assert (await env.store.load_chat(env.chat_id)).active_turn_id is None
