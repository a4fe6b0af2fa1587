"""``open_store`` with a URL it does not take says so (an embedder's SQLAlchemy habit).

Before, ``sqlite:///chats.db`` failed as "cannot open 'sqlite:///chats.db': unable to
open database file" (a ``StorageError``, as if the disk were at fault), ``sqlite:chats.db``
created a file of that name, and ``mysql://user:secret@host/db`` was opened as a path.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from turnstate import ConfigurationError, open_store


@pytest.mark.parametrize("target", ["sqlite:///chats.db", "sqlite:chats.db",
                                    "SQLite://chats.db", "mysql://user:secret@host/db"])
async def test_a_url_that_is_no_store_is_a_configuration_error(
        target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError) as caught:
        async with open_store(target):
            pass  # pragma: no cover
    assert "secret" not in str(caught.value)
    assert "SQLite file path" in str(caught.value)
    assert not any(tmp_path.iterdir())  # noqa: ASYNC240  (nothing was created)


async def test_a_plain_path_still_opens(tmp_path: Path) -> None:
    async with open_store(str(tmp_path / "chats.sqlite")) as store:
        assert (await store.create_chat(owner="alice")).owner == "alice"
