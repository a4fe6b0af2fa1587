"""``turnstate diagrams`` into a folder it cannot write, and a turn id that is not a file
name (hunt-api).

Writing into a path that is a file, or under one, reported ``internal error:
FileExistsError: ...``; a turn id holding a ``/`` (``TurnInput.turn_id`` is the
embedder's string) could not be drawn at all (``turn-a/b.mmd`` named a folder).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.cli.test_cli import run_cli
from turnstate.core import TextPart
from turnstate.storage import SqliteStore, TurnStart


@pytest.mark.parametrize("args", [[], ["--turn", "DB", "t1"]])
@pytest.mark.parametrize("where", ["file", "under-a-file"])
def test_an_unwritable_folder_is_one_line(tmp_path: Path, args: list[str],
                                          where: str) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder", encoding="utf-8")
    out = blocker if where == "file" else blocker / "sub"
    if args:
        args = ["--turn", str(asyncio.run(_db_with_turn(tmp_path, "t1"))), "t1"]
    result = run_cli("diagrams", *args, "--out", str(out))
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(f"turnstate diagrams: cannot write diagrams in {out}: ")
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_turn_id_that_is_not_a_file_name_is_drawn_under_a_safe_name(tmp_path: Path) -> None:
    db = asyncio.run(_db_with_turn(tmp_path, "a/b\nc"))
    result = run_cli("diagrams", "--turn", str(db), "a/b\nc", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "turn-a_b_c.mmd").is_file()


async def _db_with_turn(folder: Path, turn_id: str) -> Path:
    db = folder / "chats.sqlite"
    async with SqliteStore.open(db) as store:
        chat = await store.create_chat(owner="alice")
        await store.begin_turn(chat.id, TurnStart(
            turn_id=turn_id, user_parts=(TextPart(text="hi"),), provider="openai",
            model="gpt-4o"))
    return db
