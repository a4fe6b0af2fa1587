"""The event log of a detached turn across a short database outage at the turn's end:
the last write (the one holding the final event) fails, and is retried (for
``LOG_RETRY_SECONDS``) rather than given up at the first failure."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import pytest

from tests.engine.support import Env, make_turn
from turnstate.core._errors import StorageError, StorageUnavailable, TurnNotFound
from turnstate.emulators._scripted import ScriptStep
from turnstate.engine._detached import LOG_RETRY_SECONDS
from turnstate.storage._turn_log import LogBatch, turn_log_of


async def test_the_write_of_the_final_event_is_retried_after_a_failure(env: Env) -> None:
    log = turn_log_of(env.store)
    original, failed = log.append_many, []

    async def append_many(batches: Sequence[LogBatch]) -> tuple[StorageError | None, ...]:
        if not failed and any(e.final for b in batches for e in b.events):
            failed.append(1)
            msg = "the database is restarting"
            raise StorageUnavailable(msg)
        return await original(batches)

    log.append_many = append_many  # type: ignore[method-assign]
    env.backend.push("openai", ScriptStep.reply("the answer"))
    live = await env.engine.start_turn(env.chat_id, make_turn("q"))
    await env.engine.detached.settled()
    page = await log.read(env.chat_id, live.turn_id)
    assert failed == [1]
    assert page.events and page.events[-1].type == "turn_completed", page.events[-1:]
    ids = [e.id for e in page.events]
    assert ids == list(range(1, len(ids) + 1))


async def test_a_write_refused_for_good_after_the_end_is_not_retried(env: Env) -> None:
    """A refusal that no retry changes (the turn's chat was deleted meanwhile) gives the
    log up at once: ``settled`` does not wait ``LOG_RETRY_SECONDS`` for it."""
    log = turn_log_of(env.store)
    original = log.append_many

    async def append_many(batches: Sequence[LogBatch]) -> tuple[StorageError | None, ...]:
        if any(e.final for b in batches for e in b.events):
            raise TurnNotFound(batches[0].turn_id)
        return await original(batches)

    log.append_many = append_many  # type: ignore[method-assign]
    env.backend.push("openai", ScriptStep.reply("the answer"))
    await env.engine.start_turn(env.chat_id, make_turn("q"))
    async with asyncio.timeout(LOG_RETRY_SECONDS / 2):
        await env.engine.detached.settled()


async def test_an_outage_of_several_ticks_is_one_warning(
        env: Env, caplog: pytest.LogCaptureFixture) -> None:
    """Each tick retries a failed write (every ``flush_seconds``, 50 ms): the outage is
    said once, not at every retry (20 lines a second per turn)."""
    log = turn_log_of(env.store)
    original, failures = log.append_many, []

    async def append_many(batches: Sequence[LogBatch]) -> tuple[StorageError | None, ...]:
        if len(failures) < 4 and any(e.final for b in batches for e in b.events):
            failures.append(1)
            msg = "the database is restarting"
            raise StorageUnavailable(msg)
        return await original(batches)

    log.append_many = append_many  # type: ignore[method-assign]
    env.backend.push("openai", ScriptStep.reply("the answer"))
    with caplog.at_level(logging.WARNING, logger="turnstate"):
        live = await env.engine.start_turn(env.chat_id, make_turn("q"))
        await env.engine.detached.settled()
    page = await log.read(env.chat_id, live.turn_id)
    assert len(failures) == 4 and page.events[-1].type == "turn_completed"
    warnings = [r for r in caplog.records if "could not log events" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
