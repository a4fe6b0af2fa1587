"""A chat-list page token whose time has no UTC form is a 400 naming ``after``:
``0001-01-01T00:00:00+14:00`` (before year 1 in UTC) and ``9999-12-31T23:59:59-14:00``
(after 9999) raised ``OverflowError`` in the store's timestamp formatting, a 500."""

from __future__ import annotations

import base64
import json

import pytest

from tests.server.support import Api


def token(*fields: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(fields).encode()).decode().rstrip("=")


@pytest.mark.parametrize("time", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
async def test_a_page_token_without_a_utc_time_is_a_400(api: Api, time: str) -> None:
    refused = await api.json("GET", f"/api/chats?after={token(time, 'c')}", status=400)
    assert (refused["error"], refused["field"]) == ("invalid_field", "after")


async def test_the_servers_own_page_tokens_still_page(api: Api) -> None:
    chats = [await api.new_chat() for _ in range(3)]
    first = await api.json("GET", "/api/chats?limit=2")
    rest = await api.json("GET", f"/api/chats?limit=2&after={first['next']}")
    listed = [c["id"] for c in first["chats"] + rest["chats"]]
    assert sorted(listed) == sorted(chats) and rest["next"] is None
    offset = token("2026-01-01T02:00:00+02:00", "c")  # an offset is read as its UTC time
    assert (await api.json("GET", f"/api/chats?after={offset}"))["next"] is None
