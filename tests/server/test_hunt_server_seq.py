"""A seq past a 64-bit integer names no message: ``replace_from`` 2**64 was a 500.

``TurnInput`` takes any positive ``int`` as ``replace_from``; the SQLite store passed it
to SQLite, which holds 64-bit integers only, and the ``OverflowError`` surfaced as a 500
``internal_error``. A seq no store can hold is a message the chat does not have.
"""

from __future__ import annotations

import pytest

from tests.server.support import Api, turn_body


@pytest.mark.parametrize("seq", [2**63, 2**64, 10**30])
async def test_a_replace_from_past_any_stored_seq_is_message_not_found(
        api: Api, seq: int) -> None:
    chat = await api.new_chat()
    await api.turn(chat)
    refused = await api.json("POST", f"/api/chats/{chat}/turns", status=404,
                             json=turn_body(replace_from=seq))
    assert refused["error"] == "message_not_found"
    assert (await api.json("GET", f"/api/chats/{chat}"))["messageCount"] == 2
