"""``release_chat`` on a lease that names a turn without a record (an operator's tool).

A chat's lease can outlive its turn's record: a row lost to a restore from an older
backup, a hand-made repair, a custom store that writes the lease first. ``turnstate
release`` is then the operator's only way to free the chat before the lease runs out;
it used to answer "no turn holds it" and leave the chat held.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.storage.support import Backend, start
from turnstate.cli import main
from turnstate.core import MessageStatus, TurnNotFound
from turnstate.storage import MemoryStore, PostgresStore, SqliteStore, release_chat
from turnstate.storage._release import free_chat


async def _forget_turn(backend: Backend, turn_id: str) -> None:
    """Drop the turn's record, leaving the chat's lease and the turn's messages."""
    store: Any = backend.store
    if isinstance(store, MemoryStore):
        chat_id = store._turns.pop(turn_id)["chat_id"]
        store._chat_turns[chat_id].remove(turn_id)
    elif isinstance(store, PostgresStore):
        await store.fetch_raw("DELETE FROM turns WHERE id = $1", (turn_id,))
    else:
        await store.fetch_raw("DELETE FROM turns WHERE id = ?", (turn_id,))


async def test_a_lease_naming_no_recorded_turn_is_freed(backend: Backend) -> None:
    store = backend.store
    chat = await store.create_chat(owner="alice")
    await store.begin_turn(chat.id, start("ghost", lease_seconds=3600))
    await _forget_turn(backend, "ghost")
    try:
        await store.load_turn("ghost")
        raise AssertionError("the turn's record is still there")
    except TurnNotFound:
        pass

    released = await free_chat(store, chat.id)

    assert released.turn_id == "ghost" and released.record is None
    assert (await store.load_chat(chat.id)).active_turn_id is None
    # Its messages are aborted, never left in progress (a half-written answer).
    assert {m.status for m in await store.list_messages(chat.id)} == {MessageStatus.ABORTED}
    # The chat takes a new turn at once.
    await store.begin_turn(chat.id, start("next"))
    # And a second release finds the new turn, not the ghost.
    again = await release_chat(store, chat.id)
    assert again is not None and again.id == "next"


async def test_free_chat_on_a_free_chat_names_no_turn(backend: Backend) -> None:
    chat = await backend.store.create_chat(owner="alice")
    released = await free_chat(backend.store, chat.id)
    assert released.turn_id is None and released.record is None


def test_the_command_says_the_turn_had_no_record(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "chats.sqlite"

    async def held() -> str:
        async with SqliteStore.open(db) as store:
            chat = await store.create_chat(owner="alice")
            await store.begin_turn(chat.id, start("ghost", lease_seconds=3600))
            await store.fetch_raw("DELETE FROM turns WHERE id = 'ghost'")
            return chat.id

    chat_id = asyncio.run(held())
    assert main(["release", str(db), chat_id]) == 0
    out = capsys.readouterr().out
    assert "released; its lease named turn ghost, which has no record" in out

    async def check() -> None:
        async with SqliteStore.open(db) as store:
            assert (await store.load_chat(chat_id)).active_turn_id is None

    asyncio.run(check())
    assert main(["release", str(db), chat_id]) == 0
    assert "nothing to release" in capsys.readouterr().out
