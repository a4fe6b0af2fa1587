"""The UI message stream's ``finish`` says why the answer ended.

A completed turn's ``finishReason`` (``stop``, ``length``: cut at the output limit,
``content_filter``, ``refusal``, ``other``) became ``finishReason: "stop"`` on every
``finish`` chunk, so a ``useChat`` front end could not tell an answer cut at
``max_output_tokens`` from a whole one. The SDK's own names carry it now.
"""

from __future__ import annotations

import json

import pytest

from tests.server.support import Api
from turnstate.server._ui_stream import UiStream

LONG = ("please repeat all of these words back to me, every one of them in order, "
        "twenty five words or more, until you are stopped")  # > 16 words: cut at 16


async def test_an_answer_cut_at_the_output_limit_finishes_with_length(api: Api) -> None:
    chat = await api.new_chat()
    response = await api.call("POST", "/api/ui-messages", json={
        "id": chat, "provider": "openai", "model": "gpt-4o",
        "settings": {"max_output_tokens": 16},
        "messages": [{"role": "user", "parts": [
            {"type": "text", "text": LONG}]}]})
    assert response.status == 200
    frames = (await response.text()).split("\n\n")
    chunks = [json.loads(f[len("data: "):]) for f in frames if f.startswith("data: {")]
    assert chunks[-1] == {"type": "finish", "finishReason": "length"}


@pytest.mark.parametrize(("engine", "sdk"), [
    ("stop", "stop"), ("length", "length"), ("content_filter", "content-filter"),
    ("refusal", "content-filter"), ("other", "other"), (None, "stop")])
def test_each_finish_reason_has_the_sdks_name(engine: str | None, sdk: str) -> None:
    final = {"turnId": "t", "path": [], "text": ""}
    if engine is not None:
        final["finishReason"] = engine
    chunks = UiStream("t").chunks("turn_completed", final)
    assert chunks[-1] == {"type": "finish", "finishReason": sdk}
