"""MemoryStore is the reference: random operation sequences give the same results on
SqliteStore and on PostgresStore.

Each example runs one drawn sequence of store operations against a fresh MemoryStore
and a fresh ``SqliteStore(":memory:")`` (or the run's emptied PostgreSQL schema) sharing
one manual clock, and after every operation compares the outcomes (values, or error
types and messages), every stored row byte for byte, DESIGN.md section 2's invariant 1
on those rows, and each chat's history counters against its history. PostgreSQL keeps
JSON as ``jsonb`` (its own key order and spacing) and times as ``timestamptz``: its rows
and the JSON text it hands out are compared in the other stores' canonical form
(``pg_support.canonical_value``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
from hypothesis import event, given, settings

from tests import pg_support
from tests.conftest import PROFILE
from tests.storage.support import (
    ManualClock,
    abort,
    assert_counters_match_history,
    commit,
    envelope,
    loop_state,
    start,
)
from tests.strategies import store_operations
from turnstate.core._conversation import Message, TextPart, TransitionPart
from turnstate.storage import ChatRecord, MemoryStore, PostgresStore, SqliteStore, TurnLease

Outcome = tuple[Any, ...]
_COMMITS = {"cursor": lambda n: commit(f"resp_{n}"), "none": lambda n: commit(None),
            "blank": lambda n: commit(f"resp_{n}", provider_state=envelope(" ")),
            "loop": lambda n: commit(None, provider_state=loop_state())}


async def _outcome(call: Callable[[Any], Awaitable[Any]], store: Any) -> Outcome:
    try:
        return ("ok", await call(store))
    except Exception as exc:  # the exact error is what is compared
        return ("error", type(exc).__name__, str(exc))


PG_EXAMPLES = {"ci": 80, "deep": 1000}.get(PROFILE, 25)


def _canonical(value: Any) -> Any:
    """JSON text in an outcome, in the canonical form (PostgreSQL renders jsonb its way)."""
    if isinstance(value, tuple):
        return tuple(_canonical(item) for item in value)
    if isinstance(value, ChatRecord):
        return attrs.evolve(
            value, last_provider_state=pg_support.canonical_value(
                "last_provider_state", value.last_provider_state),
            last_context_state=pg_support.canonical_value(
                "last_context_state", value.last_context_state))
    if isinstance(value, Message):
        return attrs.evolve(value, provider_state=pg_support.canonical_value(
            "provider_state", value.provider_state))
    return value


class _Pair:
    def __init__(self, memory: MemoryStore, sqlite: Any, clock: ManualClock) -> None:
        self.memory, self.sqlite, self.clock = memory, sqlite, clock
        self.postgres = isinstance(sqlite, PostgresStore)
        self.leases: list[TurnLease] = []
        self.turns = 0
        self.outcomes: set[str] = set()

    async def both(self, call: Callable[[Any], Awaitable[Any]]) -> Outcome:
        expected = await _outcome(call, self.memory)
        if self.postgres:
            assert _canonical(await _outcome(call, self.sqlite)) == _canonical(expected)
        else:
            assert await _outcome(call, self.sqlite) == expected
        self.outcomes.add(expected[0] if expected[0] == "ok" else expected[1])
        return expected

    def lease(self, pick: int) -> TurnLease | None:
        return self.leases[pick % len(self.leases)] if self.leases else None

    async def apply(self, op: tuple[Any, ...]) -> None:
        kind, *args = op
        if kind == "advance":
            self.clock.advance(args[0])
        elif kind == "create":
            await self.both(lambda s: s.create_chat(owner="o", chat_id=args[0]))
        elif kind == "begin":
            self.turns += 1
            turn = start(f"t{self.turns}", lease_seconds=args[1])
            result = await self.both(lambda s: s.begin_turn(args[0], turn))
            if result[0] == "ok":
                self.leases.append(result[1])
        elif kind == "reclaim":
            await self.both(lambda s: s.reclaim_expired())
        elif kind in {"edit", "delete", "clear"}:
            await self.both(_chat_change(kind, *args))
        elif (lease := self.lease(args[0])) is not None:
            await self.both(_turn_step(kind, lease, args[1], self.turns))

    async def rows(self, table: str) -> list[dict[str, Any]]:
        if self.postgres:
            return await pg_support.canonical_rows(self.sqlite, table)
        names = [r[1] for r in await self.sqlite.fetch_raw(f"PRAGMA table_info({table})")]
        return [dict(zip(names, row, strict=True))
                for row in await self.sqlite.fetch_raw(f"SELECT * FROM {table}")]

    async def compare_rows(self) -> None:
        for table in ("chats", "messages", "turns"):
            stored = await self.rows(table)
            key = lambda row: row["id"]  # noqa: E731
            assert sorted(stored, key=key) == sorted(self.memory.raw_rows(table), key=key)
            for row in stored:
                for column in ("last_provider_state", "provider_state"):
                    text = row.get(column) or ""
                    assert "stateless-loop" not in text and "loopMessages" not in text


def _chat_change(kind: str, chat_id: str, seq: int = 0) -> Callable[[Any], Awaitable[Any]]:
    if kind == "edit":
        return lambda s: s.edit_message(chat_id, seq, (TextPart(text=f"edited {seq}"),))
    if kind == "delete":
        return lambda s: s.delete_message(chat_id, seq)
    return lambda s: s.clear_provider_state(chat_id, reason="test")


def _turn_step(kind: str, lease: TurnLease, flag: Any,
               turns: int) -> Callable[[Any], Awaitable[Any]]:
    part = TransitionPart(reason="cursor_invalid", strategy="replay", source_state="validate")
    if kind == "transition":
        return lambda s: s.record_transition(lease, part, clear_provider_state=flag)
    if kind == "commit":
        return lambda s: s.commit_turn(lease, _COMMITS[flag](turns))
    parts = (part, TextPart(text="partial")) if flag else ()
    return lambda s: s.abort_turn(lease, abort("cancelled", parts=parts))


async def _run(ops: list[tuple[Any, ...]], *, postgres: bool = False) -> None:
    clock = ManualClock()
    opened = (PostgresStore.open(pg_support.DSN, schema=pg_support.SCHEMA, clock=clock,
                                 pool_max=1)
              if postgres else SqliteStore.open(":memory:", clock=clock))
    async with opened as other:
        if postgres:
            await other.fetch_raw("TRUNCATE chats, messages, turns CASCADE")
        pair = _Pair(MemoryStore(clock=clock), other, clock)
        for op in [("create", "a"), ("create", "b"), ("begin", "a", 30.0), *ops]:
            await pair.apply(op)
            await pair.compare_rows()
            for chat in pair.memory.raw_rows("chats"):
                await assert_counters_match_history(pair.memory, chat["id"])
        for chat_id in ("a", "b"):
            for read in ("load_chat", "list_messages", "load_history", "list_turns"):
                await pair.both(lambda s, read=read, chat_id=chat_id:
                                getattr(s, read)(chat_id))
        await pair.both(lambda s: s.list_chats("o"))
        for name in sorted(pair.outcomes - {"ok"}):
            event(f"raised {name}")
        event(f"turns begun: {min(len(pair.leases), 4)}{'+' if len(pair.leases) > 3 else ''}")


@given(store_operations)
def test_sqlite_store_behaves_like_memory_store(ops: list[tuple[Any, ...]]) -> None:
    """Any operation sequence gives equal results, errors and stored rows on both stores."""
    asyncio.run(_run(ops))


@settings(max_examples=PG_EXAMPLES)
@given(ops=store_operations)
def test_postgres_store_behaves_like_memory_store(pg_schema: str,
                                                  ops: list[tuple[Any, ...]]) -> None:
    """The same on PostgreSQL: equal results, errors and (canonical) stored rows."""
    asyncio.run(_run(ops, postgres=True))
