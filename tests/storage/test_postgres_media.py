"""PostgreSQL keeps a message's media bytes apart from its parts (schema version 14,
``storage._postgres_media``): a lean read reads the parts alone and never the bytes.

Before, a 16 MiB image was 22 MB of base64 inside ``messages.parts``; the lean query
stripped it, but PostgreSQL de-TOASTed the whole value to do so: a lean read of ten such
chats read 222 MiB of buffers (``EXPLAIN (ANALYZE, BUFFERS)``) and took 1.2 s."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import attrs
import pytest

from tests import pg_support
from tests.storage.support import T0, ManualClock, commit, start
from turnstate.core import FilePart, ImagePart, MediaRef, TextPart
from turnstate.core._media_tokens import media_tokens
from turnstate.storage import PostgresStore
from turnstate.storage import _postgres_schema as schema_module
from turnstate.storage import _postgres_sql as pg_sql
from turnstate.storage._postgres_schema import migrate
from turnstate.storage._records import encode_parts

MIB = 1024 * 1024
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + (1200).to_bytes(4, "big") \
    + (900).to_bytes(4, "big") + b"\x08\x02\x00\x00\x00"
NOISE = random.Random(14).randbytes(2 * MIB)  # incompressible, as images are
IMAGE = ImagePart(media_type="image/png", data=PNG + NOISE, filename="big.png")
PDF = FilePart(data=b"%PDF-1.4 /Type /Page" + NOISE[: MIB // 2 + 1])
LINKED = ImagePart(media_type="image/png", url="https://example.com/cat.png")
PARTS = (TextPart(text="look"), IMAGE, LINKED, PDF)


@pytest.fixture
async def store(pg_schema: str) -> AsyncIterator[PostgresStore]:
    """A store holding chat c1: a question of two inline media and a linked image."""
    async with PostgresStore.open(pg_support.DSN, schema=f"{pg_schema}_media") as opened:
        await opened.fetch_raw("TRUNCATE chats, messages, turns CASCADE")
        await opened.create_chat(owner="alice", chat_id="c1")
        lease = await opened.begin_turn("c1", attrs.evolve(start("t1"), user_parts=PARTS))
        await opened.commit_turn(lease, commit("resp_1"))
        yield opened


async def _raw(store: PostgresStore) -> asyncpg.Connection:
    schema = (await store.fetch_raw("SELECT current_schema()"))[0][0]
    return await asyncpg.connect(pg_support.DSN, server_settings={"search_path": schema})


def _blocks(plan: Any) -> int:
    top = json.loads(plan)[0]["Plan"] if isinstance(plan, str) else plan[0]["Plan"]
    return int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"])


async def test_a_lean_read_touches_no_media_bytes(store: PostgresStore) -> None:
    """The rows' parts hold no bytes, and the lean statements read a few buffers (the
    2.5 MiB of media are about 430 8 KiB blocks of base64); the full and lean reads give
    what was written."""
    sizes = await store.fetch_raw("SELECT seq, pg_column_size(parts) FROM messages "
                                  "ORDER BY seq")
    assert [(seq, parts < 1024) for seq, parts in sizes] == [(1, True), (2, True)], sizes
    explain = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
    lean = [_blocks((await store.fetch_raw(explain + sql, params))[0][0]) for sql, params in (
        (pg_sql.SELECT_MESSAGES_LEAN, ("c1", None)),
        (pg_sql.WINDOW_BEFORE_LEAN, ("c1", None, 99, 5)),
        (pg_sql.WINDOW_AFTER_LEAN, ("c1", None, 0, 5)))]
    assert max(lean) < 40, lean  # before: about 470 (the parts de-TOASTed to strip them)
    (media,) = await store.fetch_raw("SELECT pg_column_size(media) FROM messages "
                                     "WHERE seq = 1")
    assert media[0] >= len(IMAGE.data or b"") + len(PDF.data or b"")
    (question, _) = await store.list_messages("c1")
    assert question.parts == PARTS
    (lean_question, _) = await store.list_messages_lean("c1")
    assert lean_question.parts[1] == MediaRef(
        kind="image", media_type="image/png", size=len(IMAGE.data or b""),
        tokens=media_tokens(IMAGE), filename="big.png")
    assert (await store.load_history("c1"))[0].parts == PARTS


async def test_parts_written_back_keep_their_bytes_and_edits_move_them(
        store: PostgresStore) -> None:
    """Parts appended to in SQL (the row's own parts written back, media by reference)
    keep their bytes; an edit keeping the images keeps them, one dropping them drops
    them; parts naming bytes a new row does not hold are refused."""
    conn = await _raw(store)
    try:
        await conn.execute("""UPDATE messages SET parts = parts || '[{"type": "text",
            "text": "more"}]' WHERE chat_id = 'c1' AND seq = 1""")
        (question, _) = await store.list_messages("c1")
        assert question.parts == (*PARTS, TextPart(text="more"))
        await store.edit_message("c1", 1, (TextPart(text="edited"), PDF, IMAGE))
        (question, _) = await store.list_messages("c1")
        assert question.parts == (TextPart(text="edited"), PDF, IMAGE)
        assert (await store.list_messages_lean("c1"))[0].parts[1].size == len(PDF.data or b"")
        await store.edit_message("c1", 1, (TextPart(text="no pictures"), LINKED))
        assert await conn.fetchval("SELECT media FROM messages WHERE seq = 1") is None
        assert (await store.list_messages("c1"))[0].parts == (
            TextPart(text="no pictures"), LINKED)
        lost = '[{"type": "image", "mediaType": "image/png", "tokens": 1, "size": 3, "media": 1}]'
        with pytest.raises(asyncpg.RaiseError, match="bytes its message does not hold"):
            await conn.execute("INSERT INTO messages (id, chat_id, seq, role, status, parts, "
                               "created_at, updated_at) VALUES ('x', 'c1', 9, 'user', "
                               "'completed', $1, now(), now())", lost)
    finally:
        await conn.close()


async def test_migration_14_sets_the_media_of_existing_messages_apart(
        pg_schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A version 13 schema's question with its base64 inline in the parts: opened by this
    turnstate, the bytes move to ``media`` and every read gives what was written."""
    schema = f"{pg_schema}_v13"
    conn = await asyncpg.connect(pg_support.DSN, server_settings={"search_path": schema})
    try:
        with monkeypatch.context() as patch:
            patch.setattr(schema_module, "LATEST_VERSION", 13)
            assert await migrate(conn, schema) == tuple(range(1, 14))
        await conn.execute("INSERT INTO chats (id, owner, created_at, updated_at) "
                           "VALUES ('c1', 'alice', $1, $1)", T0)
        await conn.execute("SELECT * FROM ts_take_turn('c1', 't1', $1, 'openai', 'gpt-4o', "
                           "$2, $3, NULL)", encode_parts(PARTS), T0, timedelta(seconds=60))
        await conn.execute("SELECT * FROM ts_commit_turn_fenced('c1', 't1', 1, 0, "
                           "'[{\"type\": \"text\", \"text\": \"hi\"}]', NULL, NULL, NULL, "
                           "NULL, 'replay', '[]', $1)", T0)
        chars = await conn.fetchval("SELECT history_chars FROM chats")
        assert await conn.fetchval("SELECT pg_column_size(parts) FROM messages "
                                   "WHERE seq = 1") > 2 * MIB
    finally:
        await conn.close()
    async with PostgresStore.open(pg_support.DSN, schema=schema,
                                  clock=ManualClock(T0)) as store:
        rows = await store.fetch_raw("SELECT seq, pg_column_size(parts), "
                                     "cardinality(media) FROM messages ORDER BY seq")
        assert [(seq, size < 1024, media) for seq, size, media in rows] == [
            (1, True, 2), (2, True, None)]
        assert (await store.list_messages("c1"))[0].parts == PARTS
        assert [type(p).__name__ for p in (await store.list_messages_lean("c1"))[0].parts] \
            == ["TextPart", "MediaRef", "MediaRef", "MediaRef"]
        assert (await store.load_chat("c1")).history_chars == chars
