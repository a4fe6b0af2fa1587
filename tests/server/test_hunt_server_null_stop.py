"""``"settings": {"stop": null}`` leaves ``stop`` unset, as a ``null`` does for every
other setting; it was a 500 (``tuple(None)`` while the list became a tuple)."""

from __future__ import annotations

import pytest

from tests.server.support import Api


@pytest.mark.parametrize("provider,model", [("openai", "gpt-4o"),
                                            ("anthropic", "claude-sonnet-4-5")])
async def test_a_null_stop_setting_is_no_stop(api: Api, provider: str, model: str) -> None:
    chat = await api.new_chat()
    events = await api.turn(chat, provider=provider, model=model,
                            settings={"stop": None, "temperature": None})
    assert events[-1].event == "turn_completed"
