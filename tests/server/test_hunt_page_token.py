"""A chat-list page token that is not one of ours is a 400 naming ``after``, whatever
it decodes to: deeply nested JSON raised ``RecursionError`` (a 500)."""

from __future__ import annotations

import base64

from tests.server.support import Api


async def test_a_deeply_nested_page_token_is_a_400(api: Api) -> None:
    token = base64.urlsafe_b64encode(b"[" * 5000).decode().rstrip("=")
    refused = await api.json("GET", f"/api/chats?after={token}", status=400)
    assert (refused["error"], refused["field"]) == ("invalid_field", "after")


async def test_a_page_token_naming_a_chat_id_that_is_not_text_is_a_400(api: Api) -> None:
    raw = b'["2026-01-01T00:00:00+00:00", "\\ud800"]'  # a lone surrogate: no UTF-8 form
    token = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    refused = await api.json("GET", f"/api/chats?after={token}", status=400)
    assert (refused["error"], refused["field"]) == ("invalid_field", "after")
