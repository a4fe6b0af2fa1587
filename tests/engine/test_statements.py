"""What a cursor turn asks of SQLite (issue 26): two transactions, no read of its own.

Begin hands the leased chat over on the lease and carries the count of the user's
message to the commit, so the turn reads nothing else: the statements are counted with
SQLite's trace callback on the store's connection.
"""

from __future__ import annotations

from pathlib import Path

from tests.engine.support import collect, make_turn
from turnstate.emulators._scripted import ScriptedBackend
from turnstate.engine import TurnEngine
from turnstate.storage import SqliteStore


async def test_a_cursor_turn_is_two_transactions_and_nothing_read_between(tmp_path: Path) -> None:
    """begin: BEGIN, the chat and its last seq, both messages, the turn, the lease
    (returning the chat), COMMIT; commit: BEGIN, the chat, both messages (one statement),
    the turn, COMMIT. Nothing between them reads the chat or the user's message back."""
    async with SqliteStore.open(tmp_path / "turns.sqlite") as store:
        backend = ScriptedBackend()
        engine = TurnEngine(store, backend.adapters(), backend)
        chat = await store.create_chat(owner="o")
        assert (await collect(engine.run_turn(chat.id, make_turn("one", tools=())))).committed
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        try:
            outcome = await collect(engine.run_turn(chat.id, make_turn("two", tools=())))
        finally:
            store._conn.set_trace_callback(None)
    assert outcome.committed and outcome.final.strategy == "cursor"
    sql = [" ".join(s.split()) for s in statements if not s.startswith("PRAGMA")]
    assert [s.split()[0] for s in sql] == [
        "BEGIN", "SELECT", "INSERT", "INSERT", "UPDATE", "COMMIT",
        "BEGIN", "UPDATE", "UPDATE", "UPDATE", "COMMIT"], sql
    assert not any(s.startswith("SELECT parts FROM messages") for s in sql)
    assert not any(s.startswith("SELECT id, owner") for s in sql)  # no load_chat
