"""``POST /api/ui-messages`` takes the turn's ``settings`` as ``POST .../turns`` does.

The transport's ``body`` carries the turn fields; ``settings`` (max output tokens,
temperature...) was dropped, so a ``useChat`` client's limits were silently ignored.
"""

from __future__ import annotations

from typing import Any

from tests.server.support import Api


def ui_turn(chat: str, **fields: Any) -> dict[str, Any]:
    return {"id": chat, "provider": "openai", "model": "gpt-4o", **fields,
            "messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]}


async def test_the_ui_route_checks_the_turns_settings(api: Api) -> None:
    chat = await api.new_chat()
    refused = await api.json("POST", "/api/ui-messages", status=400,
                             json=ui_turn(chat, settings={"max_output_tokens": 10**9}))
    assert refused["field"] == "settings.max_output_tokens"


async def test_the_ui_route_passes_the_turns_settings_on(api: Api) -> None:
    chat = await api.new_chat()
    response = await api.call("POST", "/api/ui-messages",
                              json=ui_turn(chat, settings={"max_output_tokens": 64}))
    assert response.status == 200, await response.text()
    await response.text()
    request = api.stack.emulators["openai"].requests[-1]
    assert request.json["max_output_tokens"] == 64
