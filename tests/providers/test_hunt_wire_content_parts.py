"""Chat Completions ``content`` sent as a list of parts (Mistral's reasoning models).

Mistral's OpenAI-compatible API streams a reasoning model's ``delta.content`` as a list:
``{"type": "thinking", "thinking": [{"type": "text", "text": ...}]}`` chunks, then
``{"type": "text", "text": ...}`` (recorded from ``mistral-small-latest``: vercel/ai
issue 13703 and its fixture), and the answer may start inside such a list before plain
string deltas carry on. The parser read ``content`` only as a string, so the list was
dropped whole: the reasoning was lost, and so was the answer's first piece (the user
read and the chat stored "44." for "It is 144.").
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import chunk_events
from turnstate.core._conversation import ReasoningPart, TextPart, Usage
from turnstate.providers import ReasoningDelta, TextDelta
from turnstate.providers.chat_completions import ChatCompletionsStreamParser
from turnstate.providers.chat_completions._stream import parse_chat_body

STREAM = Path(__file__).resolve().parents[1] / "data" / "chat-completions" / \
    "content-parts-thinking.chunks.txt"


def test_streamed_content_parts_keep_the_thinking_and_every_piece_of_text() -> None:
    parser = ChatCompletionsStreamParser("openai-compatible")
    deltas = [d for event in chunk_events(STREAM, event_key=None) for d in parser.feed(event)]
    assert parser.done
    response = parser.finish()
    assert response.parts == (
        ReasoningPart(provider="openai-compatible", model="magistral-small-latest",
                      kind="thinking", text="12 times 12 is 144."),
        TextPart(text="It is 144."))
    assert [d.text for d in deltas if isinstance(d, ReasoningDelta)] == ["12 times 12",
                                                                         " is 144."]
    assert [d.text for d in deltas if isinstance(d, TextDelta)] == ["It is 1", "44."]
    assert response.usage == Usage(input_tokens=20, output_tokens=32)


def test_a_body_with_content_parts_keeps_the_thinking_and_the_text() -> None:
    body = {"id": "cmpl-m1", "object": "chat.completion", "model": "magistral-small-latest",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": [
                    {"type": "thinking", "thinking": [{"type": "text", "text": "Add them."}]},
                    {"type": "text", "text": "It is "}, {"type": "text", "text": "4."}]}}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 6, "total_tokens": 15}}
    response = parse_chat_body(body, provider="openai-compatible")
    assert response.parts == (
        ReasoningPart(provider="openai-compatible", model="magistral-small-latest",
                      kind="thinking", text="Add them."),
        TextPart(text="It is 4."))
