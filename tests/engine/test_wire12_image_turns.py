"""wire12: a Gemini turn whose model generates an image, over loopback HTTP on the
emulator (``[[image]]``): the embedder sees an ``image_output`` event, the answer keeps
the image, a replay to Gemini sends it back as model content, and a replay to OpenAI
Responses says it was there in text (the wire has no assistant image)."""

from __future__ import annotations

import base64
from typing import Any

from tests.engine.support import collect
from turnstate.core import ImageOutputEvent, ImagePart, TextPart
from turnstate.core._envelope import parse_envelope
from turnstate.core._events import TurnCompleted
from turnstate.emulators import EmulatedProviders
from turnstate.emulators._media import generated_png
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore


def _turn(text: str, provider: str = "gemini", model: str = "gemini-2.5-flash") -> TurnInput:
    return TurnInput(provider=provider, model=model, system_prompt="Draw.", user_text=text)


def _contents(body: Any) -> list[Any]:
    return [block for step in body["input"] if step.get("type") == "model_output"
            for block in step["content"]]


async def test_a_generated_image_is_an_event_kept_and_replayed() -> None:
    async with EmulatedProviders(["gemini", "openai"]) as providers, \
            AiohttpTransport() as transport:
        store = MemoryStore()
        engine = TurnEngine(store, providers.adapters, transport)
        chat = await store.create_chat(owner="alice")
        outcome = await collect(engine.run_turn(chat.id, _turn("a dot please [[image]]")))
        assert isinstance(outcome.events[-1], TurnCompleted), outcome.events[-1]
        shown = [e for e in outcome.events if isinstance(e, ImageOutputEvent)]
        assert len(shown) == 1 and shown[0].media_type == "image/png"
        assert shown[0].data.startswith(b"\x89PNG")
        answer = (await store.load_history(chat.id))[-1]
        images = [p for p in answer.parts if isinstance(p, ImagePart)]
        assert images == [ImagePart(media_type="image/png", data=shown[0].data)]
        state = (await store.load_chat(chat.id)).last_provider_state
        assert state is not None
        assert shown[0].data == generated_png(f"{parse_envelope(state).cursor}:0")

        # Another Gemini model: a replay, the image back as model content.
        gemini = providers.emulators["gemini"]
        done = await collect(engine.run_turn(chat.id, _turn("again", model="gemini-2.5-pro")))
        assert isinstance(done.events[-1], TurnCompleted), done.events[-1]
        sent = _contents(gemini.requests[-1].json)
        assert {"type": "image", "mime_type": "image/png",
                "data": base64.b64encode(shown[0].data).decode()} in sent

        # OpenAI Responses: the image as text in the assistant message.
        done = await collect(engine.run_turn(chat.id, _turn("and now?", "openai", "gpt-4o")))
        assert isinstance(done.events[-1], TurnCompleted), done.events[-1]
        body = providers.emulators["openai"].requests[-1].json
        said = [item["content"] for item in body["input"]
                if item.get("role") == "assistant" and isinstance(item.get("content"), str)]
        assert any("[the assistant generated an image here (image/png, " in text
                   for text in said), said
        assert all(not isinstance(p, TextPart) or "generated image not kept" not in p.text
                   for p in answer.parts)
