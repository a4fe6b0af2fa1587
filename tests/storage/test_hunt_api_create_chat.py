"""``create_chat`` with an owner or id that is not a string is ``InvalidInput`` naming
it, on every backend, with nothing stored (hunt-api).

``MemoryStore`` stored a chat whose owner was None (no owner could then list or load it),
``SqliteStore`` refused the same call as "chat ... already exists" (its NOT NULL
constraint read as a duplicate), and a number raised a bare ``AttributeError`` from the
text check in all three.
"""

from __future__ import annotations

import pytest

from tests.storage.support import Backend
from turnstate.core import InvalidInput


@pytest.mark.parametrize(("owner", "chat_id", "field"), [
    (None, None, "owner"), (5, None, "owner"), (b"alice", None, "owner"),
    ("alice", 5, "chat_id"), ("alice", b"c1", "chat_id"),
])
async def test_an_owner_or_id_that_is_not_a_string_is_refused(
        backend: Backend, owner: object, chat_id: object, field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        await backend.store.create_chat(owner=owner, chat_id=chat_id)
    assert caught.value.field == field and "must be a string" in caught.value.problem
    assert await backend.raw_rows("chats") == []
