"""SQLite keeps a message's media bytes in ``message_media``, apart from its parts
(schema version 12, ``storage._sqlite_media``): a lean read reads the parts alone.

Before, a 16 MiB image was 22 MB of base64 inside ``messages.parts``, and SQLite reads
a column whole: a lean read (``GET /api/chats``, ``/api/ui-messages``) of a chat of ten
such images read 213 MiB from the file and held it all at once (0.4 s, +237 MiB RSS)."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import attrs
import pytest

from tests.storage.support import T0, commit, start
from turnstate.core import FilePart, ImagePart, MediaRef, TextPart
from turnstate.core._media_tokens import media_tokens
from turnstate.storage import SqliteStore
from turnstate.storage._migrations import migrate
from turnstate.storage._records import encode_parts, format_ts

MIB = 1024 * 1024
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + (1200).to_bytes(4, "big") \
    + (900).to_bytes(4, "big") + b"\x08\x02\x00\x00\x00"
NOISE = random.Random(11).randbytes(2 * MIB)
IMAGE = ImagePart(media_type="image/png", data=PNG + NOISE, filename="big.png")
PDF = FilePart(data=b"%PDF-1.4 /Type /Page" + NOISE[: MIB // 2 + 1])
LINKED = ImagePart(media_type="image/png", url="https://example.com/cat.png")
PARTS = (TextPart(text="look"), IMAGE, LINKED, PDF)
IO = Path("/proc/self/io")


def _read_chars() -> int:
    """Bytes this process has read through ``read``/``pread`` so far (Linux)."""
    return int(next(line.split()[1] for line in IO.read_text().splitlines()
                    if line.startswith("rchar:")))


async def _chat_of_media(path: Path) -> None:
    async with SqliteStore.open(path) as store:
        await store.create_chat(owner="alice", chat_id="c1")
        lease = await store.begin_turn("c1", attrs.evolve(start("t1"), user_parts=PARTS))
        await store.commit_turn(lease, commit("resp_1"))


@pytest.mark.skipif(not IO.exists(), reason="counts reads through /proc/self/io")
async def test_a_lean_read_reads_no_media_bytes_from_the_file(tmp_path: Path) -> None:
    """Opened afresh (no page cached), the lean reads read a few pages where the full
    read reads the 2.5 MiB; both give what was written."""
    path = tmp_path / "media.db"
    await _chat_of_media(path)
    async with SqliteStore.open(path) as store:
        before = _read_chars()
        listed = await store.list_messages_lean("c1")
        window = await store.load_messages_lean("c1", limit=5)
        lean_read = _read_chars() - before
        before = _read_chars()
        (question, _) = await store.list_messages("c1")
        full_read = _read_chars() - before
    assert lean_read < 256 * 1024 < 2 * MIB < full_read, (lean_read, full_read)
    assert question.parts == PARTS
    assert listed == window.messages
    assert listed[0].parts[1] == MediaRef(
        kind="image", media_type="image/png", size=len(IMAGE.data or b""),
        tokens=media_tokens(IMAGE), filename="big.png")


async def test_the_bytes_follow_their_message_through_edits_and_deletes(
        tmp_path: Path) -> None:
    """An edit keeping the images keeps them, one dropping them drops them; deleting the
    message, the tail (a regenerate's cut) or the chat deletes its bytes."""
    path = tmp_path / "media.db"
    await _chat_of_media(path)
    async with SqliteStore.open(path) as store:
        async def blobs() -> list[tuple[int, int]]:
            return [tuple(row) for row in await store.fetch_raw(  # type: ignore[misc]
                "SELECT seq, length(data) FROM message_media ORDER BY seq, place")]

        assert await blobs() == [(1, len(IMAGE.data or b"")), (1, len(PDF.data or b""))]
        await store.edit_message("c1", 1, (TextPart(text="edited"), PDF))
        assert (await store.list_messages("c1"))[0].parts == (TextPart(text="edited"), PDF)
        assert await blobs() == [(1, len(PDF.data or b""))]
        await store.edit_message("c1", 1, (TextPart(text="none"), LINKED))
        assert await blobs() == []
        await store.edit_message("c1", 1, PARTS)
        await store.delete_message("c1", 1)
        assert await blobs() == []
        lease = await store.begin_turn("c1", attrs.evolve(start("t2"), user_parts=PARTS))
        await store.commit_turn(lease, commit("resp_2"))
        await store.delete_messages_from("c1", 3)
        assert await blobs() == []
        lease = await store.begin_turn("c1", attrs.evolve(start("t3"), user_parts=PARTS))
        await store.commit_turn(lease, commit("resp_3"))
        assert (await store.load_history("c1"))[-2].parts == PARTS
        await store.delete_chat("c1")
        assert await blobs() == []


async def test_migration_11_sets_the_media_of_existing_messages_apart(tmp_path: Path) -> None:
    """A version 10 file's question holds its base64 inline: opened by this turnstate, the
    bytes move to ``message_media`` and every read gives what was written."""
    path = tmp_path / "v10.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        assert migrate(conn, target=10) == tuple(range(1, 11))
        now = format_ts(T0)
        conn.execute("INSERT INTO chats (id, owner, created_at, updated_at, committed_seq) "
                     "VALUES ('c1', 'alice', ?, ?, 2)", (now, now))
        conn.executemany(
            "INSERT INTO messages (id, chat_id, seq, role, status, parts, created_at, "
            "updated_at) VALUES (?, 'c1', ?, ?, 'completed', ?, ?, ?)",
            [("t1:user", 1, "user", encode_parts(PARTS), now, now),
             ("t1:assistant", 2, "assistant", encode_parts((TextPart(text="hi"),)), now,
              now)])
        assert conn.execute("SELECT length(parts) FROM messages WHERE seq = 1"
                            ).fetchone()[0] > 2 * MIB
    finally:
        conn.close()
    async with SqliteStore.open(path) as store:
        sizes = await store.fetch_raw("SELECT seq, length(parts) FROM messages ORDER BY seq")
        assert [(seq, size < 1024) for seq, size in sizes] == [(1, True), (2, True)]
        assert (await store.list_messages("c1"))[0].parts == PARTS
        assert (await store.list_messages_lean("c1"))[0].parts[3] == MediaRef(
            kind="file", media_type="application/pdf", size=len(PDF.data or b""),
            tokens=media_tokens(PDF))
