"""Text SQLite cannot take (a lone surrogate has no UTF-8 form) is a ``StorageError`` on
every path of the SQLite store, inline or as a hop, never a bare ``UnicodeEncodeError``."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnstate.core._errors import StorageError
from turnstate.storage import SqliteStore


async def test_a_chat_id_without_a_utf8_form_is_a_storage_error_inline(tmp_path: Path) -> None:
    async with SqliteStore.open(tmp_path / "t.db") as store:
        with pytest.raises(StorageError, match="surrogates not allowed"):
            await store.load_chat("chat-\ud800")


async def test_and_as_a_hop(tmp_path: Path) -> None:
    async with SqliteStore.open(tmp_path / "t.db", inline_writes=False) as store:
        with pytest.raises(StorageError, match="surrogates not allowed"):
            await store.load_chat("chat-\ud800")
