"""Conformance, lean reads: every backend reads a chat's media without decoding its bytes,
and PostgreSQL leaves them in the database (``storage._lean``; the shared checks are in
``turnstate.testing._store_suite_lean``)."""

from __future__ import annotations

import base64
from typing import Any

import attrs
import pytest

from tests.storage.support import Backend, commit, start
from turnstate.core import FilePart, ImagePart, MediaRef, TextPart
from turnstate.core._media_tokens import media_tokens
from turnstate.storage import _postgres_sql as pg_sql

MIB = 1024 * 1024
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + (1200).to_bytes(4, "big") \
    + (900).to_bytes(4, "big") + b"\x08\x02\x00\x00\x00"
IMAGE = ImagePart(media_type="image/png", data=PNG + bytes(2 * MIB), filename="big.png")
PDF = FilePart(data=b"%PDF-1.4 /Type /Page" + bytes(MIB // 2 + 1))


async def _chat_of_media(backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    parts = (TextPart(text="look"), IMAGE, PDF)
    lease = await store.begin_turn("c1", attrs.evolve(start("t1"), user_parts=parts))
    await store.commit_turn(lease, commit("resp_1"))


class Decodes:
    """Counts base64 decodes of more than a KiB (the stores' bytes hook calls
    ``base64.b64decode``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.large = 0
        real = base64.b64decode

        def counting(text: Any, *args: Any, **kwargs: Any) -> bytes:
            self.large += len(text) > 1024
            return real(text, *args, **kwargs)

        monkeypatch.setattr(base64, "b64decode", counting)


async def test_every_backend_reads_media_lean_without_decoding_it(
        backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same lean view on every backend, and no base64 of a media part decoded for it
    (the full read decodes both, which shows the spy sees them)."""
    await _chat_of_media(backend)
    decodes = Decodes(monkeypatch)
    listed = await backend.store.list_messages_lean("c1")
    window = await backend.store.load_messages_lean("c1", limit=4, after_seq=0)
    assert decodes.large == 0
    refs = (MediaRef(kind="image", media_type="image/png", size=len(IMAGE.data or b""),
                     tokens=media_tokens(IMAGE), filename="big.png"),
            MediaRef(kind="file", media_type="application/pdf", size=len(PDF.data or b""),
                     tokens=media_tokens(PDF)))
    assert listed[0].parts == window.messages[0].parts == (TextPart(text="look"), *refs)
    assert listed == window.messages
    full = await backend.store.list_messages("c1")
    assert full[0].parts == (TextPart(text="look"), IMAGE, PDF)
    # SQLite's and PostgreSQL's full reads get the bytes themselves, no base64: they keep
    # them apart (``storage._media_apart``); memory keeps the parts' JSON text
    assert decodes.large == (2 if backend.name == "memory" else 0)


async def test_postgres_leaves_the_bytes_in_the_database(backend: Backend) -> None:
    """The lean statements' parts column holds each media part's size, not its base64:
    the 2.5 MiB of this chat never cross the wire."""
    if backend.name != "postgres":
        pytest.skip("PostgreSQL keeps the bytes apart from the parts")
    await _chat_of_media(backend)
    rows = await backend.store.fetch_raw(pg_sql.SELECT_MESSAGES_LEAN, ("c1", None))
    window = await backend.store.fetch_raw(pg_sql.WINDOW_BEFORE_LEAN, ("c1", None, 99, 5))
    for parts in (rows[0][5], window[0][5]):
        assert len(parts) < 1024, len(parts)
        assert f'"size": {len(IMAGE.data or b"")}' in parts and '"data"' not in parts
    full = await backend.store.fetch_raw(pg_sql.SELECT_MESSAGES, ("c1", None))
    assert len(full[0][5]) < 1024  # the full read's bytes come apart (schema version 14)
    assert full[0][-1] == [IMAGE.data, PDF.data]
