"""A Chat Completions delta with both ``reasoning`` and ``reasoning_content`` is read once.

vLLM renamed ``reasoning_content`` to ``reasoning`` (vllm-project/vllm#27752, Nov 2025)
and, until it removed the old name (#33402, Jan 2026), copied one into the other on
every ``DeltaMessage`` and ``ChatMessage`` (``handle_deprecated_reasoning_content``);
relays do the same for clients that read only one field. The parser took both fields,
so every reasoning delta was shown twice and the reasoning part held the text twice.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import chunk_events
from turnstate.core._conversation import ReasoningPart, TextPart, Usage
from turnstate.providers import ReasoningDelta, SseEvent
from turnstate.providers.chat_completions import ChatCompletionsStreamParser
from turnstate.providers.chat_completions._stream import parse_chat_body

DATA = Path(__file__).resolve().parents[1] / "data" / "chat-completions"
STREAM = DATA / "reasoning-both-fields.chunks.txt"


def test_a_stream_sending_both_fields_keeps_the_reasoning_once() -> None:
    parser = ChatCompletionsStreamParser("openai-compatible")
    deltas = [d for event in chunk_events(STREAM, event_key=None) for d in parser.feed(event)]
    assert parser.done
    response = parser.finish()
    assert [d.text for d in deltas if isinstance(d, ReasoningDelta)] == ["The user", " says hi."]
    assert response.parts == (
        ReasoningPart(provider="openai-compatible", model="Qwen/Qwen3-8B",
                      kind="reasoning_content", text="The user says hi."),
        TextPart(text="Hello!"))
    assert response.usage == Usage(input_tokens=12, output_tokens=18)


def test_a_body_sending_both_fields_keeps_the_reasoning_once() -> None:
    body = {"id": "chatcmpl-vllm0b2", "object": "chat.completion", "model": "Qwen/Qwen3-8B",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": "Hello!", "reasoning": "The user says hi.",
                "reasoning_content": "The user says hi."}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 18, "total_tokens": 30}}
    response = parse_chat_body(json.loads(json.dumps(body)), provider="openai-compatible")
    reasoning = [p for p in response.parts if isinstance(p, ReasoningPart)]
    assert [p.text for p in reasoning] == ["The user says hi."]


def test_either_field_alone_is_still_read() -> None:
    for field in ("reasoning", "reasoning_content"):
        lines: list[str] = []
        for line in STREAM.read_text(encoding="utf-8").splitlines():
            chunk = json.loads(line)
            for choice in chunk["choices"]:
                choice["delta"].pop("reasoning" if field == "reasoning_content"
                                    else "reasoning_content", None)
            lines.append(json.dumps(chunk))
        parser = ChatCompletionsStreamParser("openai-compatible")
        for line in lines:
            parser.feed(SseEvent(data=line, event="message"))
        (reasoning,) = [p for p in parser.finish().parts if isinstance(p, ReasoningPart)]
        assert (reasoning.kind, reasoning.text) == (field, "The user says hi.")

