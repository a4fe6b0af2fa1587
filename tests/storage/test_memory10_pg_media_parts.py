"""A question's images read back for a local loop's next request are one PostgreSQL
statement (``PostgresStore.load_media_parts``), not one round trip a part, each of
which read the message's whole ``media`` array (``storage._media_part``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest

from tests import pg_support
from tests.storage.support import start
from turnstate.core import FilePart, ImagePart, TextPart
from turnstate.core._errors import ChatNotFound, MessageNotFound
from turnstate.engine._user_media import UserMedia
from turnstate.storage import PostgresStore

PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)
PARTS = (TextPart(text="look"), ImagePart(media_type="image/png", data=PNG + b"1"),
         ImagePart(media_type="image/png", url="https://example.com/cat.png"),
         ImagePart(media_type="image/png", data=PNG + b"2"),
         FilePart(data=b"%PDF-1.4 /Type /Page 3"))


@pytest.fixture
async def store(pg_schema: str) -> AsyncIterator[PostgresStore]:
    async with PostgresStore.open(pg_support.DSN, schema=f"{pg_schema}_m10") as opened:
        await opened.fetch_raw("TRUNCATE chats, messages, turns CASCADE")
        await opened.create_chat(owner="alice", chat_id="c1")
        yield opened


def _counted(store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    statements: list[str] = []
    call = store._call

    async def counted(sql: str, params: Any, **kwargs: Any) -> Any:
        statements.append(sql)
        return await call(sql, params, **kwargs)

    monkeypatch.setattr(store, "_call", counted)
    return statements


async def test_a_questions_media_are_read_back_in_one_statement(
        store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> None:
    lease = await store.begin_turn("c1", attrs.evolve(start("t1"), user_parts=PARTS))
    media = UserMedia(PARTS, "anthropic")
    media.release()
    statements = _counted(store, monkeypatch)
    await media.reload(store, lease, "alice")
    assert media.held() == PARTS
    assert len(statements) == 1, statements  # was 3: one a part


async def test_load_media_parts_gives_what_load_media_part_gives(
        store: PostgresStore) -> None:
    lease = await store.begin_turn("c1", attrs.evolve(start("t1"), user_parts=PARTS))
    indexes = [0, 1, 2, 3, 4, 9]
    many = await store.load_media_parts("c1", lease.user_seq, indexes, owner="alice")
    assert many == tuple([await store.load_media_part("c1", lease.user_seq, index)
                          for index in indexes])
    assert many[1] == PARTS[1] and many[4] == PARTS[4] and many[0] is None
    with pytest.raises(ChatNotFound):
        await store.load_media_parts("c1", lease.user_seq, [1], owner="bob")
    with pytest.raises(MessageNotFound):
        await store.load_media_parts("c1", 99, [1])
