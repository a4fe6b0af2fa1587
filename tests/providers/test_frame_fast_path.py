"""The frame dispatcher's delta path (``FrameDispatcher.FAST``, issue 26) against its
full path: on any frames, the same events, the same state, the same typed errors."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from hypothesis import given, settings

from tests.strategies import RESPONSES_DELTA_NAMES, responses_delta_streams
from turnstate.core._errors import ProviderProtocolError
from turnstate.providers._frames import FastHandler
from turnstate.providers._protocol import SseEvent
from turnstate.providers.openai_responses._parser import ResponsesStreamParser


class FullPath(ResponsesStreamParser):
    """The parser without its delta path: every frame dispatched by type."""

    FAST: ClassVar[Mapping[str, FastHandler]] = {}


def run(parser: ResponsesStreamParser, frames: list[tuple[str, str]]) -> list[Any]:
    """What each frame gave (events, or the error's type and text), then the items'
    state and the finished response (or its error)."""
    out: list[Any] = []
    for name, data in frames:
        try:
            out.append(list(parser.feed(SseEvent(data=data, event=name or "message"))))
        except Exception as exc:  # compared: type and text
            out.append((type(exc), str(exc)))
    out.append({index: (state.item, state.text, state.arguments, state.reasoning)
                for index, state in parser._items.items()})
    end = {"type": "response.completed", "response": {"id": "resp_1", "output": []}}
    parser.feed(SseEvent(data=json.dumps(end), event="response.completed"))
    try:
        out.append(parser.finish())
    except Exception as exc:  # a negative index fails it (guarded, live)
        out.append((type(exc), str(exc)))
    return out


@settings(max_examples=400)
@given(frames=responses_delta_streams())
def test_the_delta_path_gives_what_the_full_path_gives(frames: list[tuple[str, str]]) -> None:
    assert run(ResponsesStreamParser(), frames) == run(FullPath(), frames)


def test_the_delta_path_takes_the_common_delta() -> None:
    """A typed item's string delta goes the fast handler, the full handler unused."""
    calls: list[str] = []

    class Counting(ResponsesStreamParser):
        def _feed(self, event: SseEvent, name: str) -> Any:
            calls.append(name)
            return super()._feed(event, name)

    parser = Counting()
    added = {"type": "response.output_item.added", "output_index": 0,
             "item": {"type": "message", "id": "msg_1"}}
    parser.feed(SseEvent(data=json.dumps(added), event=added["type"]))
    for name in RESPONSES_DELTA_NAMES:
        frame = {"type": name, "output_index": 0, "item_id": "msg_1", "delta": "h\u00e9\\\""}
        parser.feed(SseEvent(data=json.dumps(frame), event=name))
    assert calls == ["response.output_item.added"]
    state = parser._items[0]
    # a refusal's delta is kept apart from the text (wire8)
    assert state.text == ["h\u00e9\\\""] and state.refusal == ["h\u00e9\\\""]
    assert state.reasoning == ["h\u00e9\\\""] * 2 and state.arguments == ["h\u00e9\\\""]


def test_a_malformed_delta_fails_as_before() -> None:
    for data in ('{"type":"response.output_text.delta","delta":"x"', "[1]", '"x"'):
        for parser in (ResponsesStreamParser(), FullPath()):
            try:
                parser.feed(SseEvent(data=data, event="response.output_text.delta"))
            except ProviderProtocolError as exc:
                assert exc.provider == "openai"
            else:
                raise AssertionError(data)
