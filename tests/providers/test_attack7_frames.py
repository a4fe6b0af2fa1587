"""Frames of odd JSON from an upstream: ``NaN`` or ``Infinity`` anywhere (Python's
``json`` reads them; RFC 8259 has no such values), and an item's or a step's ``type`` or
``id`` that is a list or an object. Parsers raised ``ValueError: Out of range float
values`` (``compact_json`` of a kept block, far from the frame) or ``TypeError:
unhashable type`` (a set or dict lookup), which ``provider_batches`` could only call "the
stream failed". A frame holding such a constant is now a malformed frame
(``ProviderProtocolError`` naming its event), and an odd type or id is no type or id.
Mutations of the corpus's streams, each fed whole and finished."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.providers.corpus import events
from turnstate.core._errors import ProviderError, ProviderProtocolError
from turnstate.emulators._emulated import kind_of
from turnstate.providers._frames import load_frame
from turnstate.providers._protocol import SseEvent

# (corpus folder, provider, case, frame index, path to the value replaced, the value)
CASES: dict[str, tuple[str, str, str, int, tuple[Any, ...], Any]] = {
    "anthropic-nan-encrypted": ("anthropic", "anthropic", "compaction-failed", 1,
                                ("content_block", "encrypted_content"), float("nan")),
    "gemini-nan-step-id": ("gemini-interactions", "gemini", "google-search-steps", 2,
                           ("step", "id"), float("nan")),
    "gemini-list-step-type": ("gemini-interactions", "gemini", "google-search-steps", 2,
                              ("step", "type"), ["a"]),
    "gemini-object-step-type": ("gemini-interactions", "gemini", "google-search-steps", 2,
                                ("step", "type"), {"a": 1}),
    "openai-list-item-type": ("openai-responses", "openai", "compaction-after-message", 7,
                              ("item", "type"), []),
    "openai-nan-item-type": ("openai-responses", "openai", "compaction-after-message", 7,
                             ("item", "type"), float("nan")),
    "openai-list-item-id": ("openai-responses", "openai", "compaction-after-message", 7,
                            ("item", "id"), ["a"]),
    "openai-object-output-id": ("openai-responses", "openai",
                                "duplicate-created-unknown-events", 12,
                                ("response", "output", 0, "id"), {"a": 1}),
}


def _mutated(folder: str, case: str, index: int, path: tuple[Any, ...],
             value: Any) -> list[SseEvent]:
    stream = events(folder, case, event_key="type")
    frame = json.loads(stream[index].data)
    node = frame
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    event = stream[index]
    stream[index] = SseEvent(data=json.dumps(frame), event=event.event, id=event.id,
                             retry=event.retry)
    return stream


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_odd_frame_is_parsed_or_refused_as_a_provider_error(name: str) -> None:
    folder, provider, case, index, path, value = CASES[name]
    parser = kind_of(provider).adapter(base_url="http://127.0.0.1:1",
                                       api_key="k").stream_parser()
    try:
        for event in _mutated(folder, case, index, path, value):
            parser.feed(event)
            if parser.done:
                break
        parser.finish()
    except ProviderError:  # refused, typed: as good as parsed
        pass


@pytest.mark.parametrize("data", ['{"a": NaN}', '{"a": [1, Infinity]}', '{"a": -Infinity}',
                                  ' {"a": NaN} '])
def test_a_frame_with_a_non_json_constant_is_malformed(data: str) -> None:
    event = SseEvent(data=data, event="message", id=None, retry=None)
    with pytest.raises(ProviderProtocolError, match="malformed frame"):
        load_frame("test", event)


@pytest.mark.parametrize("block", ["tool_use", "server_tool_use"])
@pytest.mark.parametrize("partial", ['{"q": NaN}', '{"q": Infinity}'])
def test_anthropic_streamed_input_with_a_non_json_constant_is_refused(
        block: str, partial: str) -> None:
    """A tool's input streams as JSON text in pieces, decoded once whole: with ``NaN``
    it was taken, and a server tool's block kept it to fail ``compact_json``."""
    frames: list[dict[str, Any]] = [
        {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
            "content": [], "usage": {"input_tokens": 5, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {
            "type": block, "id": "toolu_1", "name": "web_search", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {
            "type": "input_json_delta", "partial_json": partial}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
         "usage": {"output_tokens": 9}},
        {"type": "message_stop"}]
    parser = kind_of("anthropic").adapter(base_url="http://127.0.0.1:1",
                                          api_key="k").stream_parser()
    with pytest.raises(ProviderProtocolError, match="not JSON"):
        for frame in frames:
            parser.feed(SseEvent(data=json.dumps(frame), event=frame["type"], id=None,
                                 retry=None))
        parser.finish()
