"""Each codec writes a user message's images and PDFs in its wire form (issue 23 item 2):
the current message and the replayed history, a placeholder for a type the model does
not take, and text-only messages exactly as before."""

from __future__ import annotations

import base64
import json
from typing import Any

import attrs
import pytest

from tests.providers.support import message
from tests.providers.test_request_shapes import ADAPTERS, MODELS
from turnstate.core._conversation import Part, Role, TextPart
from turnstate.core._decisions import Strategy
from turnstate.core._media import FilePart, ImagePart
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers._protocol import ProviderCall

DATA = b"\x89PNG\r\n\x1a\nrest"
B64 = base64.b64encode(DATA).decode()
PDF = b"%PDF-1.7"
PDF64 = base64.b64encode(PDF).decode()
PARTS: tuple[Part, ...] = (TextPart(text="Look"), ImagePart(media_type="image/png", data=DATA),
                           ImagePart(url="https://x.example/a.jpg"),
                           FilePart(data=PDF, filename="r.pdf"),
                           FilePart(url="https://x.example/p.pdf"))

EXPECTED: dict[str, list[Any]] = {
    "openai": [{"type": "input_text", "text": "Look"},
               {"type": "input_image", "image_url": f"data:image/png;base64,{B64}",
                "detail": "auto"},
               {"type": "input_image", "image_url": "https://x.example/a.jpg", "detail": "auto"},
               {"type": "input_file", "filename": "r.pdf",
                "file_data": f"data:application/pdf;base64,{PDF64}"},
               {"type": "input_file", "file_url": "https://x.example/p.pdf"}],
    "gemini": [{"type": "text", "text": "Look"},
               {"type": "image", "data": B64, "mime_type": "image/png"},
               {"type": "image", "uri": "https://x.example/a.jpg"},
               {"type": "document", "data": PDF64, "mime_type": "application/pdf"},
               {"type": "document", "uri": "https://x.example/p.pdf",
                "mime_type": "application/pdf"}],
    "anthropic": [{"type": "text", "text": "Look"},
                  {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                               "data": B64}},
                  {"type": "image", "source": {"type": "url", "url": "https://x.example/a.jpg"}},
                  {"type": "document", "source": {"type": "base64",
                                                  "media_type": "application/pdf",
                                                  "data": PDF64}, "title": "r.pdf"},
                  {"type": "document", "source": {"type": "url",
                                                  "url": "https://x.example/p.pdf"}}],
    "openai-compatible": [
        {"type": "text", "text": "Look"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}},
        {"type": "image_url", "image_url": {"url": "https://x.example/a.jpg"}},
        {"type": "file", "file": {"filename": "r.pdf",
                                  "file_data": f"data:application/pdf;base64,{PDF64}"}},
        {"type": "text", "text": "[file omitted: https://x.example/p.pdf]"}],
}
"""The wire content of ``PARTS`` for a model taking images and files. Chat Completions
has no file URL: that one part goes as its placeholder."""


def call(provider: str, **changes: Any) -> ProviderCall:
    model = attrs.evolve(DEFAULT_REGISTRY.model(provider, MODELS[provider]),
                         inputs=frozenset({"image", "file"}))
    durable = provider in ("openai", "gemini")
    return ProviderCall(**{"strategy": Strategy.REPLAY if durable else Strategy.LOCAL_LOOP,
                           "model": model, "system_prompt": "", "tools": (),
                           "user_text": "Look", "user_parts": PARTS, **changes})


def user_contents(provider: str, body: dict[str, Any]) -> list[Any]:
    """The content of every user message of a body, oldest first."""
    if provider in ("openai", "gemini"):
        kind = "message" if provider == "openai" else "user_input"
        items = [i for i in body["input"] if i.get("type") == kind and i.get("role", "user")
                 == "user"]
    else:
        items = [m for m in body["messages"] if m["role"] == "user"]
    return [item["content"] for item in items]


def body_of(provider: str, request: ProviderCall) -> dict[str, Any]:
    return json.loads(ADAPTERS[provider]().build_request(request).body)


@pytest.mark.parametrize("provider", sorted(EXPECTED))
def test_the_current_message_carries_its_parts_in_the_wire_form(provider: str) -> None:
    assert user_contents(provider, body_of(provider, call(provider))) == [EXPECTED[provider]]


@pytest.mark.parametrize("provider", sorted(EXPECTED))
def test_replayed_history_carries_the_parts_as_sent(provider: str) -> None:
    history = (message(1, Role.USER, *PARTS), message(2, Role.ASSISTANT, TextPart(text="ok")))
    body = body_of(provider, call(provider, history=history, user_text="Again?", user_parts=()))
    first, last = user_contents(provider, body)
    assert first == EXPECTED[provider]
    assert last in ("Again?", [{"type": "text", "text": "Again?"}])


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_a_cursor_call_sends_the_new_message_alone(provider: str) -> None:
    body = body_of(provider, call(provider, strategy=Strategy.CURSOR, cursor="resp_1"))
    assert len(body["input"]) == 1
    assert user_contents(provider, body) == [EXPECTED[provider]]


@pytest.mark.parametrize("provider", sorted(ADAPTERS))
def test_a_text_only_message_is_written_exactly_as_before(provider: str) -> None:
    """``user_parts`` of one text part and the ``user_text`` shorthand: the same bytes."""
    text_only = call(provider, user_parts=())
    parts = call(provider, user_parts=(TextPart(text="Look"),))
    adapter = ADAPTERS[provider]()
    assert adapter.build_request(parts).body == adapter.build_request(text_only).body


def test_deepseek_gets_placeholders_for_history_images() -> None:
    """DeepSeek takes no images (its API answers an ``image_url`` part with a 400): a
    replayed message holding one sends its placeholder, as text."""
    model = DEFAULT_REGISTRY.model("deepseek", "deepseek-v4-flash")
    assert model.inputs == frozenset()
    history = (message(1, Role.USER, TextPart(text="See "), PARTS[1], PARTS[4]),
               message(2, Role.ASSISTANT, TextPart(text="ok")))
    body = body_of("deepseek", ProviderCall(strategy=Strategy.LOCAL_LOOP, model=model,
                                            system_prompt="", tools=(), history=history,
                                            user_text="Next"))
    assert body["messages"][0] == {
        "role": "user", "content": "See \n[image omitted: image/png, 12 bytes]\n"
                                   "\n[file omitted: https://x.example/p.pdf]"}


def test_a_model_taking_images_only_gets_placeholders_for_files() -> None:
    model = attrs.evolve(DEFAULT_REGISTRY.model("openai-compatible", "gpt-4o-mini"),
                         inputs=frozenset({"image"}))  # a server taking images alone
    history = (message(1, Role.USER, *PARTS), message(2, Role.ASSISTANT, TextPart(text="ok")))
    body = body_of("openai-compatible", ProviderCall(
        strategy=Strategy.LOCAL_LOOP, model=model, system_prompt="", tools=(),
        history=history, user_text="Next"))
    content = body["messages"][0]["content"]
    assert [c["type"] for c in content] == ["text", "image_url", "image_url", "text", "text"]
    assert content[3] == {"type": "text", "text": "\n[file omitted: application/pdf, 8 bytes]\n"}
