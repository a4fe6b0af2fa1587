"""``MemoryStore``'s per-owner byte counters and quota (``_quota``).

A message counts the UTF-8 bytes of its three stored JSON texts (parts, audit, usage:
the same texts the SQL stores keep; inline media as its base64), a title its own bytes,
a logged event its type's and data's. The counters change in the same synchronous step
as the rows, so no other coroutine sees the one without the other.
"""

from __future__ import annotations

from typing import Any

from turnstate.core._errors import StorageQuotaExceeded
from turnstate.storage._quota import check_quota, text_bytes

Row = dict[str, Any]


def message_bytes(row: Row) -> int:
    return (text_bytes(row["parts"]) + text_bytes(row["provider_state"])
            + text_bytes(row["usage"]))


class MemoryQuota:
    """The counters (``_used``, by owner) and the limit of a ``MemoryStore``."""

    _used: dict[str, int]
    _max_bytes: int | None = None

    def _grow(self, owner: str, delta: int) -> None:
        if delta:
            used = self._used.get(owner, 0) + delta
            if used:
                self._used[owner] = used
            else:
                self._used.pop(owner, None)

    def _refuse_over(self, owner: str, adding: int) -> None:
        """``StorageQuotaExceeded`` when ``adding`` bytes take ``owner`` past the quota."""
        limit = self._max_bytes
        if limit is not None and self._used.get(owner, 0) + adding > limit:
            raise StorageQuotaExceeded(owner, limit)

    async def storage_used(self, owner: str) -> int:
        return self._used.get(owner, 0)

    async def storage_quota(self) -> int | None:
        return self._max_bytes

    async def set_storage_quota(self, max_bytes: int | None) -> None:
        check_quota(max_bytes)
        self._max_bytes = max_bytes
