"""``turnstate release DB CHAT_ID``: an operator frees a stuck chat (issue 20)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from turnstate.cli import main
from turnstate.core import TextPart
from turnstate.storage import SqliteStore, TurnStart, TurnStatus


async def _held_chat(db: Path) -> tuple[str, str]:
    async with SqliteStore.open(db) as store:
        chat = await store.create_chat(owner="alice")
        lease = await store.begin_turn(chat.id, TurnStart(
            turn_id="stuck", user_parts=(TextPart(text="hi"),), provider="openai",
            model="gpt-4o", lease_seconds=3600))
        return chat.id, lease.turn_id


def test_release_frees_a_held_chat_and_records_the_turn_released(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "chats.sqlite"
    chat_id, turn_id = asyncio.run(_held_chat(db))
    assert main(["release", str(db), chat_id]) == 0
    assert f"released; turn {turn_id} is aborted (released)" in capsys.readouterr().out

    async def check() -> None:
        async with SqliteStore.open(db) as store:
            assert (await store.load_chat(chat_id)).active_turn_id is None
            record = await store.load_turn(turn_id)
            assert record.status is TurnStatus.ABORTED and record.reason == "released"
            assert {m.status.value for m in await store.list_messages(chat_id)} == {"aborted"}

    asyncio.run(check())
    assert main(["release", str(db), chat_id]) == 0
    assert "nothing to release" in capsys.readouterr().out


def test_release_of_an_unknown_chat_is_one_line_and_exit_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "chats.sqlite"
    asyncio.run(_held_chat(db))
    assert main(["release", str(db), "nope"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("turnstate release:") and "nope" in err and "Traceback" not in err
