"""Chat Completions tool arguments sent as a JSON object instead of a string.

OpenAI's wire carries ``function.arguments`` as JSON text; llama.cpp's ``llama-server``
(ggml-org/llama.cpp#20198) and Hugging Face TGI (text-generation-inference#2136) send
the object itself. The parser took only a string, so such arguments were dropped and
the call ran with ``{}``: the tool got none of what the model asked for, silently.
"""

from __future__ import annotations

import json

from turnstate.providers import SseEvent
from turnstate.providers.chat_completions import ChatCompletionsStreamParser
from turnstate.providers.chat_completions._stream import parse_chat_body


def chunk(delta: dict[str, object], finish: str | None = None) -> SseEvent:
    return SseEvent(data=json.dumps({
        "id": "chatcmpl-obj", "object": "chat.completion.chunk", "model": "qwen3-8b",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}), event="message")


def test_streamed_object_arguments_are_kept_as_json_text() -> None:
    parser = ChatCompletionsStreamParser("openai-compatible")
    for event in (
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {
            "name": "weather", "arguments": {"city": "Oslo", "days": 2}}}]}),
        chunk({}, finish="tool_calls"),
        SseEvent(data="[DONE]", event="message"),
    ):
        parser.feed(event)
    (call,) = parser.finish().tool_calls
    assert json.loads(call.arguments) == {"city": "Oslo", "days": 2}


def test_object_arguments_in_a_body_are_kept() -> None:
    body = {"id": "chatcmpl-obj2", "object": "chat.completion", "model": "qwen3-8b",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None, "tool_calls": [
                    {"id": "0", "type": "function", "function": {
                        "name": "payment_status", "arguments": {"transaction_id": "T1001"}}}]}}]}
    (call,) = parse_chat_body(body, provider="openai-compatible").tool_calls
    assert json.loads(call.arguments) == {"transaction_id": "T1001"}
