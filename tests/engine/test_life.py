"""A turn's life (issue 20): every exit releases, outcomes are reported as they landed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import pytest

from tests.engine.outage_lease import outage_lease, patient
from tests.engine.support import Env, broken, collect, make_turn, short_lease_engine
from turnstate.core import FatalProviderError
from turnstate.core._errors import ChatBusy, StorageUnavailable, TurnAlreadyRecorded
from turnstate.emulators._scripted import ScriptStep
from turnstate.engine import _life_begin
from turnstate.storage import TurnStatus


async def _free(env: Env) -> bool:
    return (await env.store.load_chat(env.chat_id)).active_turn_id is None


async def test_a_cancel_while_begin_is_in_flight_releases_the_lease_it_took(env: Env) -> None:
    """The consumer leaves during the first ``anext()`` while ``begin_turn`` is in
    flight, and the write lands anyway (a worker thread, a statement committing), after
    the cancelled caller stopped waiting for its release (at the lease's end)."""
    engine = short_lease_engine(env)
    started, gate = asyncio.Event(), asyncio.Event()
    begin = env.store.begin_turn

    async def landing(*args: Any, **kwargs: Any) -> Any:
        started.set()
        await gate.wait()
        return await begin(*args, **kwargs)

    async def in_flight(*args: Any, **kwargs: Any) -> Any:
        return await asyncio.shield(asyncio.ensure_future(landing(*args, **kwargs)))

    with broken(env.store, "begin_turn", in_flight):
        first = asyncio.ensure_future(anext(engine.run_turn(env.chat_id, make_turn("a"))))
        await started.wait()
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first
        gate.set()
        await asyncio.gather(*_life_begin._BACKGROUND)
    assert await _free(env)
    (record,) = await env.store.list_turns(env.chat_id)
    assert record.status is TurnStatus.ABORTED and record.reason == "cancelled"
    assert (await env.turn("b")).committed


async def test_a_lone_surrogate_in_a_provider_error_is_stored_and_the_chat_is_free(
        env: Env) -> None:
    """A relay cut a message inside an emoji: the detail is made storable, not refused."""
    adapter = env.engine.adapters["openai"]

    def classify(*args: Any) -> Any:
        return FatalProviderError("openai", "cut inside \ud83d an emoji " + "x" * 2000,
                                  status=500)

    env.backend.push("openai", ScriptStep.fail(500))
    with broken(adapter, "classify_error", classify):
        outcome = await env.turn("a")
    final: Any = outcome.final
    assert final.reason == "provider_failed" and "\ufffd" in final.detail
    assert len(final.detail) <= 503 and "\ud83d" not in final.detail
    assert await _free(env)
    (record,) = await env.store.list_turns(env.chat_id)
    assert record.status is TurnStatus.ABORTED and record.detail == final.detail


async def test_an_abort_detail_goes_through_the_one_scrubber_before_any_write(
        env: Env) -> None:
    """A store failure quoting a connection string (with its password) and a NUL: the
    event and the stored turn record carry the same detail, scrubbed, without the NUL.
    The store stays away: the turn ends once its patience is spent (a short lease)."""
    async def leaky(*args: Any, **kwargs: Any) -> Any:
        msg = "could not connect to postgresql://app:s3cr3t-Pw-9@db.internal/prod\x00 now"
        raise StorageUnavailable(msg)

    with broken(env.store, "load_history", leaky), outage_lease(env) as took:
        outcome = await env.turn("a")
    assert patient(took), took
    final: Any = outcome.final
    assert final.reason == "storage_failed" and "db.internal" in final.detail
    assert "s3cr3t-Pw-9" not in final.detail and "\x00" not in final.detail
    (record,) = await env.store.list_turns(env.chat_id)
    assert record.detail == final.detail and await _free(env)


async def test_an_abort_write_that_fails_is_retried_while_the_lease_lasts(env: Env) -> None:
    abort, failures = env.store.abort_turn, []

    async def flaky(*args: Any, **kwargs: Any) -> Any:
        if len(failures) < 3:
            failures.append(1)
            msg = "the database restarts"
            raise StorageUnavailable(msg)
        return await abort(*args, **kwargs)

    env.backend.push("openai", ScriptStep.fail(400, "bad_request"))
    with broken(env.store, "abort_turn", flaky):
        outcome = await env.turn("a")
    assert outcome.final.reason == "provider_failed"  # type: ignore[union-attr]
    assert len(failures) == 3 and await _free(env)


async def test_a_commit_whose_reply_was_lost_is_reported_as_it_landed(env: Env) -> None:
    commit = env.store.commit_turn

    async def reply_lost(*args: Any, **kwargs: Any) -> Any:
        await commit(*args, **kwargs)
        msg = "connection lost after the statement was sent"
        raise StorageUnavailable(msg)

    with broken(env.store, "commit_turn", reply_lost):
        outcome = await env.turn("a")
    assert outcome.committed, outcome.final
    (record,) = await env.store.list_turns(env.chat_id)
    assert record.status is TurnStatus.COMPLETED


async def test_a_commit_that_failed_before_landing_is_commit_failed(env: Env) -> None:
    """The store refuses every commit (reads still work): sent again while the turn's
    patience lasts (a short lease), then ``commit_failed``, the abort recorded."""
    sends: list[object] = []

    async def down(*args: Any, **kwargs: Any) -> Any:
        sends.append(args)
        msg = "the database is down"
        raise StorageUnavailable(msg)

    with broken(env.store, "commit_turn", down), outage_lease(env) as took:
        outcome = await env.turn("a")
    assert outcome.final.reason == "commit_failed"  # type: ignore[union-attr]
    assert patient(took) and len(sends) > 3, (took, len(sends))
    assert await _free(env)
    (record,) = await env.store.list_turns(env.chat_id)
    assert record.status is TurnStatus.ABORTED and record.reason == "commit_failed"


async def test_a_reused_turn_id_answers_from_the_store(env: Env) -> None:
    first = await env.turn("a", turn_id="t-1")
    sent = len(env.backend.requests)
    again = await collect(env.engine.run_turn(env.chat_id, make_turn("a", turn_id="t-1")))
    assert again.committed and len(env.backend.requests) == sent  # no provider call
    assert again.final.text == first.final.text  # type: ignore[union-attr]
    assert again.path == first.path
    env.backend.push("openai", ScriptStep.fail(400, "bad_request"))
    await env.turn("b", turn_id="t-2")
    with pytest.raises(TurnAlreadyRecorded, match=r"t-2.*aborted"):
        await collect(env.engine.run_turn(env.chat_id, make_turn("b", turn_id="t-2")))
    gate = asyncio.Event()
    env.backend.push("openai", ScriptStep.reply("late", gate=gate, gate_after=0))
    running = asyncio.ensure_future(collect(env.engine.run_turn(
        env.chat_id, make_turn("c", turn_id="t-3"))))
    await env.backend.wait_for_requests(sent + 2)
    with pytest.raises(ChatBusy):
        await collect(env.engine.run_turn(env.chat_id, make_turn("c", turn_id="t-3")))
    gate.set()
    assert (await running).committed


async def test_a_commit_conflict_is_logged_without_a_traceback(
        env: Env, caplog: pytest.LogCaptureFixture) -> None:
    await env.turn("one")
    gate = asyncio.Event()
    env.backend.push("openai", ScriptStep.reply("late", gate=gate, gate_after=0))
    sent = len(env.backend.requests)
    task = asyncio.ensure_future(collect(env.engine.run_turn(env.chat_id, make_turn("two"))))
    await env.backend.wait_for_requests(sent + 1)
    await env.store.clear_provider_state(env.chat_id, reason="test")
    with caplog.at_level(logging.DEBUG, logger="turnstate"):
        gate.set()
        outcome = await task
    assert outcome.final.reason == "commit_conflict"  # type: ignore[union-attr]
    assert not [r for r in caplog.records if r.exc_info], caplog.text
