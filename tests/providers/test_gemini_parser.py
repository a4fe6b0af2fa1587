"""Gemini Interactions stream parsing against recorded traffic and handwritten streams."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.conftest import DATA_DIR
from tests.helpers import chunk_events
from tests.providers.support import parse_stream
from turnstate.core._conversation import ReasoningPart, TextPart, ToolCallPart, Usage
from turnstate.core._errors import (
    CursorRejected,
    FatalProviderError,
    ProviderError,
    ProviderProtocolError,
    TransientProviderError,
)
from turnstate.providers import ProviderResponse, ReasoningDelta, SseEvent, TextDelta
from turnstate.providers._sse import SseDecoder
from turnstate.providers.gemini_interactions import (
    InteractionsStreamParser,
    parse_response_body,
)

DATA = DATA_DIR / "gemini-interactions"


@attrs.frozen(kw_only=True)
class Expected:
    """What one interaction stream must yield."""

    interaction_id: str | None = None
    texts: tuple[str, ...] = ()
    calls: tuple[tuple[str, str, str, str | None], ...] = ()
    thoughts: tuple[tuple[str, str | None], ...] = ()
    usage: Usage | None = None
    finish: str | None = None
    error: type[ProviderError] | None = None
    error_code: str | None = None
    reason: str | None = None


def parse(events: list[SseEvent]) -> tuple[ProviderResponse, list[Any]]:
    return parse_stream(InteractionsStreamParser(), events)


def check(events: list[SseEvent], expected: Expected) -> None:
    if expected.error is not None:
        with pytest.raises(expected.error) as caught:
            parse(events)
        assert type(caught.value) is expected.error
        assert caught.value.code == expected.error_code
        if expected.reason is not None:
            assert isinstance(caught.value, CursorRejected)
            assert caught.value.reason == expected.reason
        return
    response, deltas = parse(events)
    texts = tuple(p.text for p in response.parts if isinstance(p, TextPart))
    calls = tuple((p.call_id, p.name, p.arguments, p.signature) for p in response.parts
                  if isinstance(p, ToolCallPart))
    thoughts = tuple((p.text, p.signature) for p in response.parts
                     if isinstance(p, ReasoningPart))
    assert response.response_id == expected.interaction_id
    assert texts == expected.texts
    assert calls == expected.calls
    assert thoughts == expected.thoughts
    assert response.usage == expected.usage
    assert response.finish_reason == expected.finish
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == "".join(texts)
    assert "".join(d.text for d in deltas if isinstance(d, ReasoningDelta)) == \
        "".join(t for t, _ in thoughts)
    for part in response.parts:
        if isinstance(part, ReasoningPart | ToolCallPart):
            assert part.provider == "gemini"


def usage(i: int, o: int, thoughts: int = 0, cached: int = 0) -> Usage:
    """Engine usage: output counts the thoughts too."""
    return Usage(input_tokens=i, output_tokens=o + thoughts, cached_input_tokens=cached,
                 reasoning_tokens=thoughts)


def _signature(path: Path, index: int = 0) -> str:
    for line in path.read_text().splitlines():
        frame = json.loads(line)
        if frame.get("event_type") == "step.delta" and frame.get("index") == index:
            signature: str = frame["delta"]["signature"]
            return signature
    raise AssertionError("no signature")


# --- recorded traffic ----------------------------------------------------------------

RECORDED: dict[str, Expected] = {
    "basic.chunks.txt": Expected(
        interaction_id="v1_ChdUR3NIYXVyQkFlYVA2ZGtQajZERThBVRIXVEdzSGF1ckJBZWFQNmRrUGo2REU4QVU",
        texts=("I'm doing great, thank you for asking!\n\nHow are you doing today? And what "
               "can I do for you?",),
        thoughts=(("", "<signature>"),), usage=usage(7, 26, thoughts=115), finish="stop"),
    "multi-turn-stateful-turn1.chunks.txt": Expected(
        interaction_id="v1_ChdYR3NIYXB6dkJzTy1xdHNQcTR5RDZRVRIXWEdzSGFwenZCc08tcXRzUHE0eUQ2UVU",
        texts=("The three largest cities in Spain by population are:\n\n1.  **Madrid**\n2.  "
               "**Barcelona**\n3.  **Valencia**",),
        thoughts=(("", "<signature>"),), usage=usage(10, 31, thoughts=137), finish="stop"),
    "multi-turn-stateful-turn2.chunks.txt": Expected(
        interaction_id="v1_ChdYR3NIYXB6dkJzTy1xdHNQcTR5RDZRVRIXWG1zSGF0VG1KSml0cXRzUHpJZmd3QUU",
        texts=("The most famous landmark in **Barcelona** (the second largest city) is "
               "undoubtedly the **Sagrada Familia**.\n\nIt's an iconic basilica designed by "
               "Antoni Gaudí, famous for its unique architecture and the fact that it has been "
               "under construction for over a century.",),
        thoughts=(("", "<signature>"),), usage=usage(12, 54, thoughts=391), finish="stop"),
    "tool-call-step1.chunks.txt": Expected(
        interaction_id="v1_ChdVbXNIYXVEUkVacmpxdHNQb3JQeXlBRRIXVW1zSGF1RFJFWnJqcXRzUG9yUHl5QUU",
        calls=(("61nzpsv4", "getWeather", '{"location":"San Francisco"}', None),),
        thoughts=(("", "<signature>"),), usage=usage(53, 15, thoughts=65),
        finish="tool_calls"),
    "tool-call-step2.chunks.txt": Expected(
        interaction_id="v1_ChZWR3NIYW9wMXJLYWEyUS1odWIyd0FREhZWR3NIYW9wMXJLYWEyUS1odWIyd0FR",
        texts=("The weather in San Francisco right now is sunny with a temperature of 27 "
               "degrees Celsius.",),
        thoughts=(("", "CiRlMjQ4MzBhNy01Y2Q2LTQyZmUtOTk4Yi1lZTUzOWU3MmI5YzM="),),
        usage=usage(161, 19), finish="stop"),
}


def test_every_recorded_stream_has_expectations(recorded_dir: Path) -> None:
    """A recorded file added to the folder must get an entry here."""
    folder = recorded_dir / "gemini-interactions"
    assert {p.name for p in folder.glob("*.chunks.txt")} == set(RECORDED)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_stream(recorded_dir: Path, name: str) -> None:
    """Each recorded interaction yields its text, calls, thought signatures, id and usage."""
    path = recorded_dir / "gemini-interactions" / name
    expected = RECORDED[name]
    if expected.thoughts and expected.thoughts[0][1] == "<signature>":
        expected = attrs.evolve(expected, thoughts=(("", _signature(path)),))
    check(chunk_events(path, event_key="event_type"), expected)


def test_recorded_non_streaming_bodies(recorded_dir: Path) -> None:
    """basic.json and tool-call-step1.json parse into parts, ids and usage."""
    folder = recorded_dir / "gemini-interactions"
    basic = json.loads((folder / "basic.json").read_text())
    response = parse_response_body(basic)
    assert response.response_id == basic["id"]
    assert response.parts == (
        ReasoningPart(provider="gemini", model="gemini-2.5-flash", kind="thought",
                      signature=basic["steps"][0]["signature"]),
        TextPart(text="Hello! I'm doing well, thank you for asking.\n\nHow are you today?"))
    assert response.usage == usage(7, 19, thoughts=32) and response.finish_reason == "stop"
    tool = parse_response_body(json.loads((folder / "tool-call-step1.json").read_text()))
    assert tool.tool_calls == (ToolCallPart(
        call_id="zggxzq8r", name="getWeather", arguments='{"location":"San Francisco"}',
        provider="gemini", model="gemini-2.5-flash"),)
    assert tool.finish_reason == "tool_calls" and tool.usage == usage(53, 15, thoughts=41)


# --- handwritten streams (tests/data/gemini-interactions) ----------------------------

HANDWRITTEN: dict[str, Expected] = {
    "text.chunks.txt": Expected(interaction_id="v1_ZGF0YS0wMDAx",
                                texts=("Bonjour, le monde.",), usage=usage(5, 4, cached=2),
                                finish="stop"),
    "thought-summary.chunks.txt": Expected(
        interaction_id="v1_ZGF0YS0wMDAy", texts=("Short answer.",),
        thoughts=(("**Planning**\n\nAnswer briefly.", "c2lnLXRob3VnaHQ="),),
        usage=usage(8, 3, thoughts=20), finish="stop"),
    "call-complete-in-start.chunks.txt": Expected(
        interaction_id="v1_ZGF0YS0wMDAz",
        calls=(("k3j9x2aa", "lookup", '{"q":"tea","n":2}', None),), usage=usage(30, 7),
        finish="tool_calls"),
    "parallel-calls.chunks.txt": Expected(
        interaction_id="v1_ZGF0YS0wMDA0", texts=("Checking two cities.",),
        thoughts=(("", "c2lnLWE="),),
        calls=(("aaaa1111", "getWeather", '{"location":"Paris"}', "c2lnLWNhbGw="),
               ("bbbb2222", "getWeather", '{"location":"Oslo"}', None)),
        usage=usage(60, 25, thoughts=12, cached=40), finish="tool_calls"),
    "error-gateway-timeout.chunks.txt": Expected(error=TransientProviderError,
                                                 error_code="gateway_timeout"),
    "error-cursor.chunks.txt": Expected(error=CursorRejected, error_code="not_found",
                                        reason="cursor_expired"),
    "incomplete.chunks.txt": Expected(interaction_id="v1_ZGF0YS0wMDA3",
                                      texts=("It was a dark and",), usage=usage(10, 5),
                                      finish="length"),
    "failed.chunks.txt": Expected(error=FatalProviderError, error_code="invalid_argument"),
    "legacy-text.chunks.txt": Expected(error=ProviderProtocolError),  # test_wire_data.py
}


def test_every_handwritten_stream_has_expectations() -> None:
    """Each data file is checked (the truncated one has its own test)."""
    names = {p.name for p in DATA.glob("*.chunks.txt")} - {"truncated.chunks.txt"}
    assert names == set(HANDWRITTEN)


@pytest.mark.parametrize("name", sorted(HANDWRITTEN))
def test_handwritten_stream(name: str) -> None:
    """Each handwritten stream yields what the wire reference says it should."""
    check(chunk_events(DATA / name, event_key="event_type"), HANDWRITTEN[name])


def test_raw_stream_with_done_event() -> None:
    """Full frames end with ``event: done`` / ``data: [DONE]``, which is ignored."""
    events = SseDecoder().feed((DATA / "full-stream.sse").read_bytes())
    assert (events[-1].event, events[-1].data) == ("done", "[DONE]")
    response, _ = parse(events)
    assert response.parts == (TextPart(text="Raw stream."),)
    assert response.response_id == "v1_ZGF0YS0wMDEw"


def test_truncated_stream_fails_cleanly() -> None:
    """A stream without interaction.completed is a protocol error at finish."""
    parser = InteractionsStreamParser()
    for event in chunk_events(DATA / "truncated.chunks.txt", event_key="event_type"):
        parser.feed(event)
    assert not parser.done and parser.interaction_id == "v1_ZGF0YS0wMDA5"
    with pytest.raises(ProviderProtocolError, match=r"before interaction\.completed"):
        parser.finish()


def test_handwritten_non_streaming_bodies() -> None:
    """A requires_action body yields its signed call; a failed one raises."""
    response = parse_response_body(json.loads((DATA / "function-call.json").read_text()))
    assert response.parts == (
        ReasoningPart(provider="gemini", model="gemini-2.5-pro", kind="thought",
                      text="Need data.", signature="c2lnLWJvZHk="),
        ToolCallPart(call_id="cccc3333", name="lookup", arguments='{"q":"coffee"}',
                     provider="gemini", model="gemini-2.5-pro", signature="c2lnLWZj"))
    assert response.finish_reason == "tool_calls"
    with pytest.raises(TransientProviderError, match="overloaded"):
        parse_response_body(json.loads((DATA / "failed.json").read_text()))


def test_malformed_and_unknown_frames() -> None:
    """Non-JSON data is a protocol error; unknown events and deltas are ignored."""
    parser = InteractionsStreamParser()
    with pytest.raises(ProviderProtocolError):
        parser.feed(SseEvent(event="step.delta", data="{oops"))
    assert parser.feed(SseEvent(data='{"event_type":"step.delta","index":0,'
                                     '"delta":{"type":"image","data":"AAA"}}')) == ()
    assert parser.feed(SseEvent(data='{"event_type":"interaction.mystery"}')) == ()
