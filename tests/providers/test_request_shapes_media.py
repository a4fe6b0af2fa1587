"""Request bodies with images and PDFs validate against the official SDK types (issue 23
item 2), for every codec: the current message's parts (replay and cursor calls) and
history holding them. Reuses ``sdk_params``' walker (unknown keys are
failures, dialect fields excepted)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import attrs
import pytest

from tests.providers.sdk_params import params_for, unknown_fields
from tests.providers.support import message
from tests.providers.test_request_shapes import ADAPTERS, MODELS, WEATHER
from turnstate.core._conversation import Message, Part, Role, TextPart
from turnstate.core._decisions import Strategy
from turnstate.core._media import FilePart, ImagePart
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers._protocol import ProviderCall

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 120
PARTS: tuple[Part, ...] = (
    TextPart(text="What are these?"),
    ImagePart(media_type="image/png", data=PNG),
    ImagePart(url="https://example.com/cat.jpg"),
    ImagePart(media_type="image/webp", url="https://example.com/dog.webp"),
    FilePart(data=b"%PDF-1.4 /Type /Page", filename="report.pdf"),
    FilePart(data=b"%PDF-1.4 /Type /Page"),
    FilePart(url="https://example.com/paper.pdf"),
)


def _history() -> tuple[Message, ...]:
    return (message(1, Role.USER, *PARTS), message(2, Role.ASSISTANT, TextPart(text="Pets.")))


def media_calls(provider: str) -> Iterator[tuple[str, ProviderCall]]:
    model = DEFAULT_REGISTRY.model(provider, MODELS[provider])
    durable = provider in ("openai", "gemini")
    base = ProviderCall(strategy=Strategy.REPLAY if durable else Strategy.LOCAL_LOOP,
                        model=model, system_prompt="Be brief.", tools=(WEATHER,),
                        user_text="What are these?", user_parts=PARTS)
    yield "first-message", base
    yield "history", attrs.evolve(base, history=_history(), user_text="And now?", user_parts=())
    if durable:
        yield "cursor", attrs.evolve(base, strategy=Strategy.CURSOR, cursor="resp_prev")
    # A model taking both types: Chat Completions' ``file`` part, DeepSeek's too.
    vision = attrs.evolve(model, inputs=frozenset({"image", "file"}))
    yield "every-input-type", attrs.evolve(base, model=vision, history=_history())


@pytest.mark.parametrize("provider", list(ADAPTERS))
def test_bodies_with_images_and_files_validate_against_the_sdk_types(provider: str) -> None:
    adapter = ADAPTERS[provider]()
    for label, call in media_calls(provider):
        request = adapter.build_request(call)
        body = json.loads(request.body)
        assert unknown_fields(provider, body, params_for(provider, request)) == [], (label, body)


@pytest.mark.parametrize("provider", ["openai", "gemini", "anthropic", "openai-compatible"])
def test_the_media_parts_are_on_the_wire_not_dropped(provider: str) -> None:
    """The validated bodies carry the parts (a body without them would validate too)."""
    adapter = ADAPTERS[provider]()
    for label, call in media_calls(provider):
        body = adapter.build_request(call).body.decode()
        assert "https://example.com/cat.jpg" in body, label
        assert "iVBORw0KGgo" in body, label  # the PNG's base64
        assert "https://example.com/paper.pdf" in body, label  # as a placeholder, at least
        if provider != "openai-compatible" or label == "every-input-type":
            assert "JVBERi0xLjQ" in body, label  # the PDF's base64
