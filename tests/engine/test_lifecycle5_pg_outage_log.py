"""A database outage is two log lines, not a traceback per reconnect (lifecycle5).

asyncpg's pool logs ``Failed to restore the pool connection floor; retrying`` with the
whole connection traceback at each failed reconnect (1 s, 2 s, 4 s ... apart) for as
long as the database is away. The store's pools now log one ``turnstate`` WARNING when
the outage starts and one INFO line when the database answers again; an error that is
not the database being away keeps asyncpg's record, traceback and all.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests import pg_support
from tests.tcp_proxy import TcpProxy, proxied, proxied_dsn, upstream_of
from turnstate.core._errors import StorageError
from turnstate.storage import PostgresStore
from turnstate.storage import _postgres_outage_log as outage_log

SCHEMA = f"{pg_support.SCHEMA}_outage_log"
DEADLINE = 8.0


@pytest.fixture
async def proxy(pg_schema: str) -> AsyncIterator[TcpProxy]:
    async with proxied(*upstream_of(pg_support.DSN)) as tcp:
        yield tcp


def _lines(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == name]


def _second_failure(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """Set at asyncpg's second failed reconnect (before the logger's own filters)."""
    logger = logging.getLogger("asyncpg.pool")
    inner, seen, count = list(logger.filters), asyncio.Event(), [0]

    def counting(record: logging.LogRecord) -> bool:
        if record.msg == outage_log.FLOOR_MESSAGE:
            count[0] += 1
            if count[0] >= 2:
                seen.set()
        return all(f.filter(record) if isinstance(f, logging.Filter) else f(record)
                   for f in inner)

    monkeypatch.setattr(logger, "filters", [counting])
    return seen


async def test_an_outage_logs_its_start_and_end_once(
        proxy: TcpProxy, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.INFO)
    async with PostgresStore.open(proxied_dsn(pg_support.DSN, proxy), schema=SCHEMA,
                                  pool_min=1, pool_max=2, statement_timeout=1.0,
                                  command_timeout=1.5, acquire_timeout=1.5) as store:
        chat = await store.create_chat(owner="alice")
        second = _second_failure(monkeypatch)
        await proxy.refuse()
        proxy.cut()  # the pool's connection is lost; asyncpg reconnects it, and fails
        with pytest.raises(StorageError):
            await store.load_chat(chat.id)
        async with asyncio.timeout(DEADLINE):  # its second attempt comes 1 s after the first
            await second.wait()
        await proxy.flow()
        assert (await store.load_chat(chat.id)).id == chat.id
    floor = [r for r in _lines(caplog, "asyncpg.pool") if r.msg == outage_log.FLOOR_MESSAGE]
    assert floor == [], "asyncpg's traceback per reconnect is still logged"
    said = [r.getMessage() for r in _lines(caplog, "turnstate") if "[postgres]" in r.getMessage()]
    assert len(said) == 2, said
    assert said[0].startswith("[postgres] lost its connection to the database "
                              "(ConnectionRefusedError"), said
    assert said[1].startswith("[postgres] reached the database again after "), said
    assert "(2 reconnects failed)" in said[1] or "(3 reconnects failed)" in said[1], said


def _record(exc: BaseException) -> logging.LogRecord:
    try:
        raise exc
    except BaseException:
        info = sys.exc_info()
    return logging.LogRecord("asyncpg.pool", logging.WARNING, __file__, 1,
                             outage_log.FLOOR_MESSAGE, (), info)


def test_other_errors_and_other_pools_keep_asyncpg_s_record() -> None:
    quiet = outage_log.ReconnectFilter()
    # not an outage: a refused password says something is wrong, with its traceback
    assert quiet.filter(_record(asyncpg.InvalidPasswordError("bad password")))
    # an outage, but outside a pool's reconnecting task (not a pool of ours)
    assert quiet.filter(_record(ConnectionRefusedError(111, "refused")))
    assert outage_log.unreachable(asyncpg.CannotConnectNowError("starting up"))
    assert not outage_log.unreachable(asyncpg.UndefinedTableError("no table"))
