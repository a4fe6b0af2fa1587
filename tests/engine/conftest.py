"""Engine test fixtures: every engine test runs against each Store backend."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.engine.support import Env, FakeClock
from turnstate.emulators._scripted import ScriptedBackend
from turnstate.engine._driver import TurnEngine
from turnstate.storage import MemoryStore

BACKENDS = ["memory"]
try:
    from turnstate.storage import SqliteStore

    BACKENDS.append("sqlite")
except ImportError:  # pragma: no cover - until the SQLite store lands
    SqliteStore = None  # type: ignore[assignment,misc]


@pytest.fixture(params=BACKENDS)
async def env(request: pytest.FixtureRequest) -> AsyncIterator[Env]:
    """A chat on a fresh store, a scripted backend serving every provider, an engine."""
    clock = FakeClock()
    if request.param == "memory":
        store = MemoryStore(clock=clock)
        yield await _env(store, clock)
        return
    async with SqliteStore.open(":memory:", clock=clock) as sqlite_store:
        yield await _env(sqlite_store, clock)


async def _env(store: object, clock: FakeClock) -> Env:
    backend = ScriptedBackend()
    engine = TurnEngine(store, backend.adapters(), backend, clock=clock)  # type: ignore[arg-type]
    chat = await store.create_chat(owner="alice")  # type: ignore[attr-defined]
    return Env(store=store, backend=backend, engine=engine, clock=clock,  # type: ignore[arg-type]
               chat_id=chat.id)
