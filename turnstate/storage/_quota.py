"""The bytes each owner stores, and the optional quota on them (every store).

Each store keeps one counter per owner, ``storage_used(owner)``: the bytes of what the
owner's chats hold, counted in the same write as every change that grows or shrinks it
(a turn's messages, their media, edits, the turn-events log and its trimming, titles)
and freed by every delete, so an owner with no chats left counts 0. Each store counts
its own stored form (SQLite and PostgreSQL: ``_sqlite_quota``, ``_postgres_quota``;
``MemoryStore``: the UTF-8 bytes of its rows' JSON texts and of its log's events), so
the numbers of two stores differ for the same chats; each is exact for its store.

``set_storage_quota(max_bytes)`` (None: no quota, the default) sets the limit: the SQL
stores keep it in the database (every process using it enforces it), ``MemoryStore`` on
itself. A write the owner makes that would take the counter past it raises
``StorageQuotaExceeded`` and writes nothing: a turn's begin (its user message and its
media: refused before any provider call), an edit that grows a completed message, a
title set or grown. A turn's commit, transition, abort, reclaim and its event log are
never refused, because the provider was paid for them: they may take the owner past the
quota, and the owner's next begin is refused.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from turnstate.core._errors import ConfigurationError

__all__ = ["QuotaStore", "check_quota", "text_bytes"]


@runtime_checkable
class QuotaStore(Protocol):
    """A store that counts its owners' bytes (the three stores of ``turnstate.storage``)."""

    async def storage_used(self, owner: str) -> int:
        """The bytes ``owner``'s chats hold (0 for an owner with none)."""
        ...

    async def storage_quota(self) -> int | None:
        """The limit ``set_storage_quota`` set (None: none)."""
        ...

    async def set_storage_quota(self, max_bytes: int | None) -> None:
        """Refuse the owners' writes that would take them past ``max_bytes``."""
        ...


def check_quota(max_bytes: object) -> None:
    """Raise ``ConfigurationError`` unless ``max_bytes`` is None or an int >= 0."""
    if max_bytes is None:
        return
    if type(max_bytes) is not int or max_bytes < 0 or max_bytes >= 2**63:
        msg = f"a storage quota is a number of bytes from 0 to 2**63 - 1, got {max_bytes!r}"
        raise ConfigurationError(msg)


def text_bytes(text: str | None) -> int:
    """The UTF-8 bytes of a stored text (0 for None); a lone surrogate counts 3."""
    if text is None:
        return 0
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))
