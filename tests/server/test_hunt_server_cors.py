"""A client on the ``--cors-origin`` origin can resume a turn as the docs say.

A resume names the turn (the ``X-Turn-Id`` header of the turn's answer) and the last
event seen (a ``Last-Event-ID`` header). Across origins a browser lets a script read
only the headers ``Access-Control-Expose-Headers`` names, and sends a header the
preflight's ``Access-Control-Allow-Headers`` does not name not at all: the turn id was
unreadable and a resume with ``Last-Event-ID`` was refused by the browser.
"""

from __future__ import annotations

import pytest

from tests.server.support import Api, parse_sse, turn_body
from tests.server.test_hardening import GUARDED

ORIGIN = {"Origin": "https://chat.example"}


def _names(header: str) -> set[str]:
    return {name.strip().lower() for name in header.split(",")}


@pytest.mark.parametrize("config", [GUARDED])
async def test_a_preflight_allows_the_last_event_id_header(api: Api) -> None:
    chat = await api.new_chat()
    response = await api.client.options(
        f"/api/chats/{chat}/turns/t/events",
        headers={**ORIGIN, "Access-Control-Request-Method": "GET",
                 "Access-Control-Request-Headers": "authorization,last-event-id"})
    assert response.status == 204
    allowed = _names(response.headers["Access-Control-Allow-Headers"])
    assert {"authorization", "last-event-id", "idempotency-key"} <= allowed  # idem9
    assert "if-match" in allowed  # places11: an edit's or delete's precondition


@pytest.mark.parametrize("config", [GUARDED])
async def test_the_turn_id_header_is_exposed_to_the_allowed_origin(api: Api) -> None:
    chat = await api.new_chat()
    response = await api.call("POST", f"/api/chats/{chat}/turns", json=turn_body(),
                              headers=ORIGIN)
    assert response.status == 200
    assert {"x-turn-id", "retry-after", "idempotent-replayed"} <= _names(
        response.headers["Access-Control-Expose-Headers"])
    events, _ = parse_sse(await response.text())
    turn = response.headers["X-Turn-Id"]
    resumed = await api.call("GET", f"/api/chats/{chat}/turns/{turn}/events",
                             headers={**ORIGIN, "Last-Event-ID": "1"})
    assert "x-turn-id" in _names(resumed.headers["Access-Control-Expose-Headers"])
    assert [e.id for e in parse_sse(await resumed.text())[0]] == [e.id for e in events[1:]]
