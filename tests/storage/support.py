"""Shared pieces of the storage tests: a manual clock, record builders, backends.

``BACKENDS`` maps a name to a factory that opens a fresh store: a new backend gets the
whole conformance suite (and the concurrency tests) by adding one entry there.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from tests import pg_support
from turnstate.core._context import ContextSnapshot, Severity, TokenSource, part_chars
from turnstate.core._conversation import AuditState, Part, TextPart, TransitionPart, Usage
from turnstate.core._envelope import ContinuationEnvelope, Mode
from turnstate.core._path import PathStep
from turnstate.storage import (
    ChatRecord,
    MemoryStore,
    PostgresStore,
    SqliteStore,
    Store,
    TurnAbort,
    TurnCommit,
    TurnLease,
    TurnStart,
)
from turnstate.testing._records import T0, ManualClock  # noqa: F401 (T0 re-exported to the storage tests)


def envelope(cursor: str = "resp_1", **changes: Any) -> ContinuationEnvelope:
    base = ContinuationEnvelope(provider="openai", mode=Mode.RESPONSES, model_name="gpt-4o",
                                system_prompt_hash="sys", toolset_hash="tools", cursor=cursor)
    return attrs.evolve(base, **changes)


def loop_state() -> ContinuationEnvelope:
    return ContinuationEnvelope(provider="anthropic", mode=Mode.STATELESS_LOOP,
                                model_name="claude", system_prompt_hash="sys",
                                toolset_hash="tools",
                                loop_messages=({"role": "assistant", "content": "x"},))


def audit(cursor: str | None = "resp_1", **changes: Any) -> AuditState:
    base = AuditState(provider="openai", model_name="gpt-4o", strategy="cursor",
                      system_prompt_hash="sys", toolset_hash="tools", cursor=cursor)
    return attrs.evolve(base, **changes)


SNAPSHOT = ContextSnapshot(estimated_input_tokens=1200, context_limit=128000,
                           estimated_usage_ratio=1200 / 128000, severity=Severity.NORMAL,
                           source=TokenSource.PROVIDER)
PATH = (PathStep(source="validate", trigger="continue_with_cursor", dest="cursor"),
        PathStep(source="cursor", trigger="completed", dest="persist"),
        PathStep(source="persist", trigger="committed", dest="done"))
TRANSITION = TransitionPart(reason="model_changed", strategy="replay", source_state="validate")


def start(turn_id: str, text: str = "hello", **changes: Any) -> TurnStart:
    fields: dict[str, Any] = {"turn_id": turn_id, "user_parts": (TextPart(text=text),),
                              "provider": "openai", "model": "gpt-4o"}
    fields.update(changes)
    return TurnStart(**fields)


def commit(cursor: str | None = "resp_1", parts: Sequence[Part] = (TextPart(text="hi"),),
           **changes: Any) -> TurnCommit:
    fields: dict[str, Any] = {
        "parts": tuple(parts),
        "provider_state": None if cursor is None else envelope(cursor),
        "audit": audit(cursor), "usage": Usage(input_tokens=1200, output_tokens=7),
        "context": SNAPSHOT, "strategy": "cursor", "path": PATH,
    }
    fields.update(changes)
    return TurnCommit(**fields)


def abort(reason: str = "provider_failed", **changes: Any) -> TurnAbort:
    return TurnAbort(reason=reason, **changes)


async def committed_turn(store: Store, chat_id: str, turn_id: str, *, cursor: str | None = None,
                         text: str = "hello", reply: str = "hi") -> ChatRecord:
    """One whole turn through the protocol: begin, then commit."""
    lease = await store.begin_turn(chat_id, start(turn_id, text))
    return await store.commit_turn(lease, commit(cursor, parts=(TextPart(text=reply),)))


def cursor_of(state: str | None) -> str | None:
    """The cursor named by a stored ``last_provider_state`` (None when there is none)."""
    return None if state is None else json.loads(state)["cursor"]


@attrs.define
class Backend:
    """A store under test plus backend-specific access to its raw rows."""

    name: str
    store: Any  # MemoryStore | SqliteStore | PostgresStore; tests use the Store protocol
    clock: ManualClock
    path: Path | None = None
    reopen_store: Callable[[], contextlib.AbstractAsyncContextManager[Any]] | None = None
    stack: contextlib.AsyncExitStack = attrs.field(factory=contextlib.AsyncExitStack)

    async def raw_rows(self, table: str) -> list[dict[str, Any]]:
        """Every stored row of ``table`` as column -> stored value."""
        if isinstance(self.store, MemoryStore):
            return [dict(row) for row in self.store.raw_rows(table)]
        if isinstance(self.store, PostgresStore):
            return await pg_support.canonical_rows(self.store, table)
        names = [row[1] for row in await self.store.fetch_raw(f"PRAGMA table_info({table})")]
        rows = await self.store.fetch_raw(f"SELECT * FROM {table}")
        return [dict(zip(names, row, strict=True)) for row in rows]

    async def raw_states(self) -> list[str]:
        """Every stored provider state: ``chats.last_provider_state`` and audit records."""
        chats = [row["last_provider_state"] for row in await self.raw_rows("chats")]
        audits = [row["provider_state"] for row in await self.raw_rows("messages")]
        return [text for text in chats + audits if text is not None]

    async def reopen(self) -> None:
        """Close the store and open the same database again (file backends only)."""
        assert self.reopen_store is not None
        await self.stack.aclose()
        self.stack = contextlib.AsyncExitStack()
        self.store = await self.stack.enter_async_context(self.reopen_store())


@contextlib.asynccontextmanager
async def _memory(tmp_path: Path, clock: ManualClock) -> AsyncIterator[Backend]:
    yield Backend(name="memory", store=MemoryStore(clock=clock), clock=clock)


@contextlib.asynccontextmanager
async def _sqlite_memory(tmp_path: Path, clock: ManualClock) -> AsyncIterator[Backend]:
    backend = Backend(name="sqlite-memory", store=None, clock=clock)
    backend.store = await backend.stack.enter_async_context(
        SqliteStore.open(":memory:", clock=clock))
    try:
        yield backend
    finally:
        await backend.stack.aclose()


def _sqlite_file_backend(name: str, *, inline_writes: bool) -> Callable[
        [Path, ManualClock], contextlib.AbstractAsyncContextManager[Backend]]:
    @contextlib.asynccontextmanager
    async def open_backend(tmp_path: Path, clock: ManualClock) -> AsyncIterator[Backend]:
        path = tmp_path / "chats.db"

        def reopen() -> Any:
            return SqliteStore.open(path, clock=clock, inline_writes=inline_writes)

        backend = Backend(name=name, store=None, clock=clock, path=path, reopen_store=reopen)
        backend.store = await backend.stack.enter_async_context(reopen())
        try:
            yield backend
        finally:
            await backend.stack.aclose()

    return open_backend


_sqlite_file = _sqlite_file_backend("sqlite-file", inline_writes=True)
_sqlite_file_worker = _sqlite_file_backend("sqlite-file-worker", inline_writes=False)


@contextlib.asynccontextmanager
async def _postgres(tmp_path: Path, clock: ManualClock) -> AsyncIterator[Backend]:
    """The run's PostgreSQL schema, emptied: tests need the ``pg_schema`` fixture first."""

    def reopen() -> Any:
        return PostgresStore.open(pg_support.DSN, schema=pg_support.SCHEMA, clock=clock,
                                  pool_max=4)

    backend = Backend(name="postgres", store=None, clock=clock, reopen_store=reopen)
    backend.store = await backend.stack.enter_async_context(reopen())
    await backend.store.fetch_raw("TRUNCATE chats, messages, turns, owner_storage CASCADE")
    await backend.store.set_storage_quota(None)  # no row trigger saw the truncate
    try:
        yield backend
    finally:
        await backend.stack.aclose()


BACKENDS: dict[str, Callable[[Path, ManualClock],
                             contextlib.AbstractAsyncContextManager[Backend]]] = {
    "memory": _memory,
    "sqlite-memory": _sqlite_memory,
    "sqlite-file": _sqlite_file,
    # The same file store with every write on the store's worker thread (the path a
    # write takes when another process holds the lock).
    "sqlite-file-worker": _sqlite_file_worker,
    # The run's own schema on the local server (TURNSTATE_PG_DSN); skips without one.
    "postgres": _postgres,
}
"""Every backend the conformance suite runs against."""


def lease_ids(lease: TurnLease) -> tuple[str, str]:
    return lease.user_message_id, lease.assistant_message_id


async def assert_counters_match_history(store: Store, chat_id: str) -> ChatRecord:
    """The chat's ``committed_seq`` and ``history_chars`` are what its history says."""
    chat = await store.load_chat(chat_id)
    history = await store.load_history(chat_id)
    expected_seq = history[-1].seq if history else None
    expected_chars = part_chars([part for message in history for part in message.parts])
    assert (chat.committed_seq, chat.history_chars) == (expected_seq, expected_chars)
    return chat
