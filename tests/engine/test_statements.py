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
    """begin: one statement (the chat the store committed last is checked, the lease
    taken, both messages and the turn written: ``BEGIN_KNOWN``); commit: one statement
    (the chat, both messages, the turn: ``COMMIT_KNOWN``); each is its own transaction
    (issue 26: BEGIN, five statements, COMMIT and BEGIN, three, COMMIT before). Nothing
    between them reads the chat or the user's message back."""
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
    # SQLite traces each statement a trigger runs as the statement that fired it.
    sql = [" ".join(s.split()) for index, s in enumerate(statements)
           if not s.startswith("PRAGMA") and (index == 0 or s != statements[index - 1])]
    assert [s.split(" (")[0] for s in sql] == [
        "INSERT INTO temp.turn_begins_attached", "INSERT INTO temp.turn_commits"], sql
    assert not any(s.startswith("SELECT parts FROM messages") for s in sql)
    assert not any(s.startswith("SELECT id, owner") for s in sql)  # no load_chat
