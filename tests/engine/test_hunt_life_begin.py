"""A begin whose reply was lost (hunt-life).

PostgreSQL reports a connection that dropped mid-statement as ``StorageUnavailable``
for a write that may have committed whole. A lost reply to ``begin_turn`` left the turn
it may have begun holding the chat with nobody running it: every turn on the chat was
``ChatBusy`` until the lease ran out (30 s by default), and the retried id too.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from tests.engine.support import Env, broken, make_turn, short_lease_engine
from turnstate.core._errors import StorageUnavailable
from turnstate.engine import _life_begin
from turnstate.storage import TurnStatus


async def test_a_begin_that_landed_but_lost_its_reply_frees_the_chat(env: Env) -> None:
    begin = env.store.begin_turn

    async def reply_lost(*args: Any, **kwargs: Any) -> Any:
        await begin(*args, **kwargs)
        msg = "postgres connection lost (the write was applied whole or not at all)"
        raise StorageUnavailable(msg)

    with broken(env.store, "begin_turn", reply_lost), pytest.raises(StorageUnavailable):
        await anext(env.engine.run_turn(env.chat_id, make_turn("a", turn_id="t-lost")))
    assert (await env.store.load_chat(env.chat_id)).active_turn_id is None
    record = await env.store.load_turn("t-lost")
    assert record.status is TurnStatus.ABORTED and record.reason == "storage_failed"
    assert not [m for m in await env.store.list_messages(env.chat_id)
                if m.status.value == "in_progress"]
    assert (await env.turn("b")).committed


async def test_a_begin_that_did_not_land_touches_nothing_more(env: Env) -> None:
    async def down(*args: Any, **kwargs: Any) -> Any:
        msg = "the database is down"
        raise StorageUnavailable(msg)

    with broken(env.store, "begin_turn", down), pytest.raises(StorageUnavailable):
        await anext(env.engine.run_turn(env.chat_id, make_turn("a", turn_id="t-none")))
    assert not await env.store.list_turns(env.chat_id)
    assert (await env.turn("b")).committed


async def test_a_cancelled_begin_that_landed_but_lost_its_reply_frees_the_chat(
        env: Env) -> None:
    """The consumer left while the begin was in flight; the begin then landed and its
    reply was lost: the release in the background reads it back and frees the chat."""
    engine = short_lease_engine(env)
    started, gate = asyncio.Event(), asyncio.Event()
    begin = env.store.begin_turn

    async def landing(*args: Any, **kwargs: Any) -> Any:
        started.set()
        await gate.wait()
        await begin(*args, **kwargs)
        msg = "postgres connection lost (the write was applied whole or not at all)"
        raise StorageUnavailable(msg)

    async def in_flight(*args: Any, **kwargs: Any) -> Any:
        return await asyncio.shield(asyncio.ensure_future(landing(*args, **kwargs)))

    with broken(env.store, "begin_turn", in_flight):
        first = asyncio.ensure_future(
            anext(engine.run_turn(env.chat_id, make_turn("a", turn_id="t-gone"))))
        await started.wait()
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first
        gate.set()
        await asyncio.gather(*_life_begin._BACKGROUND)
    assert (await env.store.load_chat(env.chat_id)).active_turn_id is None
    assert (await env.store.load_turn("t-gone")).status is TurnStatus.ABORTED
    assert (await env.turn("b")).committed


async def test_a_cancel_during_the_read_back_still_frees_the_chat(env: Env) -> None:
    """The consumer is cancelled while the lost begin is read back (a store read that
    suspends): the release goes on in the background and frees the chat."""
    begin, load_turn, reading, gate = env.store.begin_turn, env.store.load_turn, \
        asyncio.Event(), asyncio.Event()

    async def reply_lost(*args: Any, **kwargs: Any) -> Any:
        await begin(*args, **kwargs)
        msg = "postgres connection lost (the write was applied whole or not at all)"
        raise StorageUnavailable(msg)

    async def slow_read(*args: Any, **kwargs: Any) -> Any:
        reading.set()
        await gate.wait()
        return await load_turn(*args, **kwargs)

    with broken(env.store, "begin_turn", reply_lost), broken(env.store, "load_turn", slow_read):
        first = asyncio.ensure_future(
            anext(env.engine.run_turn(env.chat_id, make_turn("a", turn_id="t-read"))))
        await reading.wait()
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first
        gate.set()
        await asyncio.gather(*_life_begin._BACKGROUND)
    assert (await env.store.load_chat(env.chat_id)).active_turn_id is None
    assert (await env.store.load_turn("t-read")).status is TurnStatus.ABORTED
