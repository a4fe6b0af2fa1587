"""A chat's earlier images replayed past the provider's request limit (embed6).

Each turn's own images are checked against the provider's request limit before the lease
(Anthropic: 32,000,000 base64 characters a request). A replay sends every earlier user
message's images again, so a chat of a few large images switched to Anthropic sent a
request over its 32 MB (the real API's 413 ``request_too_large``: that turn, and every later
one of the chat on Anthropic, failed; three 7 MiB images and a 3 MiB one went out as 33.5 M
characters). Now the oldest are sent as their ``[image omitted: ...]`` text, the newest
whole, and the audit counts them. The limit is lowered here so the images are small and
the test takes milliseconds."""

from __future__ import annotations

import base64
import json

import pytest

from turnstate import ImagePart, TextPart, TurnEngine, TurnInput
from turnstate.core import _media_fit
from turnstate.core._media_fit import fit_history_media
from turnstate.emulators import EmulatedProviders
from turnstate.testing import emulated_engine, emulated_providers, turn_events

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")


LIMIT = 10_000
"""Anthropic's request limit for these tests, in base64 characters (really 32,000,000)."""


def image(kib: int) -> ImagePart:
    return ImagePart(media_type="image/png", data=PNG + b"\0" * (kib << 10))


def images_sent(body: bytes) -> int:
    """How many base64 images the Anthropic request carries."""
    return sum(1 for message in json.loads(body)["messages"] if message["role"] == "user"
               for block in message["content"]
               if isinstance(block, dict) and block.get("type") == "image")


async def test_a_switch_to_anthropic_leaves_out_the_oldest_images_past_its_request_limit(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_media_fit, "MEDIA_LIMITS", {"anthropic": {"request": LIMIT}})
    store = emulated_engine.store
    chat = await store.create_chat(owner="o")
    for n in range(3):  # 3 KiB each: 4,192 base64 characters
        turn = TurnInput(provider="gemini", model="gemini-2.5-flash", system_prompt="s",
                         content=(TextPart(text=f"picture {n}"), image(3)))
        assert (await turn_events(emulated_engine.run_turn(chat.id, turn)))[-1].type \
            == "turn_completed"
    turn = TurnInput(provider="anthropic", model="claude-sonnet-4-5", system_prompt="s",
                     content=(TextPart(text="and this one"), image(1)))
    events = await turn_events(emulated_engine.run_turn(chat.id, turn))
    assert events[-1].type == "turn_completed"
    body = emulated_providers.emulators["anthropic"].requests[-1].body
    assert images_sent(body) == 3  # the turn's own and the two newest of the history
    assert body.count(b"AAAA") * 4 < LIMIT  # the base64 of the images sent
    sent = json.loads(body)["messages"][0]["content"]  # text parts only: one text block
    omitted = f"[image omitted: image/png, {len(image(3).data or b''):,} bytes]"
    assert sent == [{"type": "text", "text": f"picture 0\n{omitted}"}]
    answer = (await store.list_messages(chat.id))[-1]
    assert json.loads(answer.provider_state or "{}")["metadata"]["mediaOmitted"] == 1
    # the store keeps every image whole
    assert sum(isinstance(p, ImagePart) for m in await store.list_messages(chat.id)
               for p in m.parts) == 4


def test_a_history_of_text_is_sent_as_it_is() -> None:
    from turnstate import DEFAULT_REGISTRY
    model = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")
    assert fit_history_media((), (TextPart(text="x"),), model) == ((), 0)
