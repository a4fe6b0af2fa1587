"""wire8: a tool call's ``function.name`` across fragments: named once (OpenAI, vLLM,
llama.cpp, Ollama), repeated on every fragment (some relays), or split in pieces
(openai-python's ``accumulate_delta`` joins every string)."""

from __future__ import annotations

import json

import pytest

from turnstate.providers._protocol import SseEvent
from turnstate.providers.chat_completions import ChatCompletionsAdapter


def _chunk(calls: list[dict[str, object]] | None, finish: str | None = None) -> SseEvent:
    delta: dict[str, object] = {"tool_calls": calls} if calls is not None else {}
    return SseEvent(data=json.dumps({
        "id": "c1", "object": "chat.completion.chunk", "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}))


def _calls(names: list[str | None], *, ids: bool = False) -> list[tuple[str, str]]:
    parser = ChatCompletionsAdapter().stream_parser()
    pieces = ['{"city"', ': "Paris"', "}"]
    for number, (name, piece) in enumerate(zip(names, pieces, strict=True)):
        function: dict[str, object] = {"arguments": piece}
        if name is not None:
            function["name"] = name
        fragment: dict[str, object] = {"index": 0, "function": function}
        if number == 0 or ids:
            fragment["id"] = "call_1"
            fragment["type"] = "function"
        parser.feed(_chunk([fragment]))
    parser.feed(_chunk(None, "tool_calls"))
    parser.feed(SseEvent(data="[DONE]"))
    return [(call.name, call.arguments) for call in parser.finish().tool_calls]


WHOLE = [("get_weather", '{"city": "Paris"}')]


@pytest.mark.parametrize(("names", "ids"), [
    (["get_weather", None, None], False),  # OpenAI, vLLM, llama.cpp: named once
    (["get_weather", "get_weather", "get_weather"], False),  # repeated on every fragment
    (["get_weather", "get_weather", "get_weather"], True),  # ... with its id each time
    (["get_weather", "", ""], False),  # an empty name later changes nothing
], ids=["once", "repeated", "repeated-with-id", "empty-later"])
def test_one_name_whatever_the_fragments_repeat(names: list[str | None], ids: bool) -> None:
    assert _calls(names, ids=ids) == WHOLE


def test_a_name_split_in_pieces_is_joined_as_the_sdk_does() -> None:
    assert _calls(["get_", "weather", None]) == WHOLE


def test_a_name_sent_as_growing_snapshots_is_not_doubled() -> None:
    assert _calls(["get", "get_weather", "get_weather"]) == WHOLE
