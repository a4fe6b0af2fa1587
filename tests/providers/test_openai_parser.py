"""OpenAI Responses stream parsing against recorded traffic and handwritten streams."""

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
    RateLimited,
    TransientProviderError,
)
from turnstate.providers import ProviderResponse, ReasoningDelta, SseEvent, TextDelta
from turnstate.providers._sse import SseDecoder
from turnstate.providers.openai_responses import ResponsesStreamParser, parse_response_body

DATA = DATA_DIR / "openai-responses"


@attrs.frozen(kw_only=True)
class Expected:
    """What one response of a file must yield."""

    response_id: str | None = None
    texts: tuple[str, ...] = ()
    text_prefixes: tuple[str, ...] = ()
    calls: tuple[tuple[str, str, str], ...] = ()
    reasoning: tuple[tuple[str, str | None], ...] = ()
    usage: Usage | None = None
    finish: str | None = None
    metadata: dict[str, Any] = attrs.field(factory=dict)
    error: type[ProviderError] | None = None
    error_code: str | None = None
    error_text: str = ""


def responses_in(events: list[SseEvent]) -> list[list[SseEvent]]:
    """A recorded file may hold several responses: each starts at response.created."""
    groups: list[list[SseEvent]] = []
    for event in events:
        if event.event == "response.created" or not groups:
            groups.append([])
        groups[-1].append(event)
    return groups


def parse(events: list[SseEvent]) -> tuple[ProviderResponse, list[Any]]:
    return parse_stream(ResponsesStreamParser(), events)


def check(events: list[SseEvent], expected: Expected) -> None:
    if expected.error is not None:
        with pytest.raises(expected.error) as caught:
            parse(events)
        assert type(caught.value) is expected.error
        assert caught.value.code == expected.error_code
        assert caught.value.status is None
        assert expected.error_text in caught.value.detail
        return
    response, deltas = parse(events)
    texts = [p.text for p in response.parts if isinstance(p, TextPart)]
    calls = [(p.call_id, p.name, p.arguments) for p in response.parts
             if isinstance(p, ToolCallPart)]
    reasoning = [(p.text, p.data) for p in response.parts if isinstance(p, ReasoningPart)]
    assert response.response_id == expected.response_id
    if expected.text_prefixes:
        assert len(texts) == len(expected.text_prefixes)
        assert all(t.startswith(p) for t, p in zip(texts, expected.text_prefixes, strict=True))
    else:
        assert tuple(texts) == expected.texts
    assert tuple(calls) == expected.calls
    assert tuple(reasoning) == expected.reasoning
    assert response.usage == expected.usage
    assert response.finish_reason == expected.finish
    assert response.metadata == expected.metadata
    # What streamed as deltas is what the parts hold.
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == "".join(texts)
    streamed_reasoning = "".join(d.text for d in deltas if isinstance(d, ReasoningDelta))
    if streamed_reasoning:
        assert streamed_reasoning == "\n\n".join(r for r, _ in reasoning)


def usage(i: int, o: int, cached: int = 0, reasoning: int = 0) -> Usage:
    return Usage(input_tokens=i, output_tokens=o, cached_input_tokens=cached,
                 reasoning_tokens=reasoning)


# --- recorded traffic ----------------------------------------------------------------

_ENCRYPTED = "openai-reasoning-encrypted-content.1.chunks.txt"
RECORDED: dict[str, list[Expected]] = {
    "azure-tool-call.1.chunks.txt": [Expected(
        response_id="resp_04041325ab8ae30400698c519fb7fc81979972618138fc336d",
        calls=(("call_H5DxLSFnsGhiROnUiDHmgyc8", "weather", '{"location":"San Francisco"}'),),
        usage=usage(45, 24), finish="tool_calls")],
    "openai-compaction.1.chunks.txt": [Expected(
        response_id="resp_0e2ed64344ac7f31016994b30480ac819785e6e4cd43a28c52",
        text_prefixes=("### Testing strategies: unit vs integration vs E2E (end-to-end)\n\n",),
        usage=usage(51097, 2505, cached=49792), finish="stop",
        metadata={"compacted": True, "compactionItemIds": [
            "cmp_0e2ed64344ac7f31016994b32006d881978568fd34e3e7fb5f"]})],
    "openai-error.1.chunks.txt": [Expected(
        error=FatalProviderError, error_code="insufficient_quota",
        error_text="You exceeded your current quota")],
    "openai-phase.1.chunks.txt": [Expected(
        response_id="resp_0a63f40a2632b74300699f8818e5648196a8fa657ae8091421",
        text_prefixes=("Got it — I’ll quickly check reliable, up-to-date sources",
                       "Here are a few **AI headlines for today"),
        usage=usage(7112, 463, cached=3072, reasoning=64), finish="stop")],
    _ENCRYPTED: [
        Expected(response_id="resp_01830d662ab3856501693c321345c88190b0de00f3b9975691",
                 reasoning=(("**Calculating step-by-step using calculator**\n\nI'll compute 12 "
                             "plus 7, then multiply the result by 3, and finally multiply that "
                             "by 10, reporting the final product.", "<from item.done>"),),
                 calls=(("call_AB6AaRZ1FYZB2RwS6A5vbdqn", "calculator",
                         '{"a":12,"b":7,"op":"add"}'),),
                 usage=usage(134, 28), finish="tool_calls"),
        Expected(response_id="resp_01830d662ab3856501693c3215903881909b710d150ff65014",
                 calls=(("call_Q6pW65MUgW9vF59BmItYGos3", "calculator",
                         '{"a":19,"b":3,"op":"multiply"}'),),
                 usage=usage(221, 26), finish="tool_calls"),
        Expected(response_id="resp_01830d662ab3856501693c3216bef88190bf0e034cff24137b",
                 calls=(("call_Zl5vIMnD7dVAjgU6FkhmiCZh", "calculator",
                         '{"a":57,"b":10,"op":"multiply"}'),),
                 usage=usage(260, 26), finish="tool_calls"),
        Expected(response_id="resp_01830d662ab3856501693c3217ba4c8190a3ddf6c839d4f12a",
                 texts=("The final result is **570**.",), usage=usage(299, 12), finish="stop"),
    ],
}


def _with_done_encryption(path: Path, expected: list[Expected]) -> list[Expected]:
    """The reasoning item's encrypted_content is the one of ``output_item.done``."""
    if path.name != _ENCRYPTED:
        return expected
    done = next(json.loads(line) for line in path.read_text().splitlines()
                if '"response.output_item.done"' in line and '"reasoning"' in line)
    first = expected[0]
    text = first.reasoning[0][0]
    fixed = attrs.evolve(first, reasoning=((text, done["item"]["encrypted_content"]),))
    return [fixed, *expected[1:]]


def test_every_recorded_stream_has_expectations(recorded_dir: Path) -> None:
    """A recorded file added to the folder must get an entry here."""
    folder = recorded_dir / "openai-responses"
    assert {p.name for p in folder.glob("*.chunks.txt")} == set(RECORDED)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_stream(recorded_dir: Path, name: str) -> None:
    """Each recorded response yields its text, calls, reasoning, ids, usage or error."""
    path = recorded_dir / "openai-responses" / name
    groups = responses_in(chunk_events(path))
    expected = _with_done_encryption(path, RECORDED[name])
    assert len(groups) == len(expected)
    for events, wanted in zip(groups, expected, strict=True):
        check(events, wanted)


def test_recorded_encrypted_reasoning_is_the_completed_blob(recorded_dir: Path) -> None:
    """output_item.added carries a partial encrypted_content; the part keeps the final one."""
    path = recorded_dir / "openai-responses" / _ENCRYPTED
    response, _ = parse(responses_in(chunk_events(path))[0])
    part = response.parts[0]
    assert isinstance(part, ReasoningPart) and part.data is not None
    added = next(json.loads(line) for line in path.read_text().splitlines()
                 if '"response.output_item.added"' in line and '"reasoning"' in line)
    assert part.data != added["item"]["encrypted_content"]
    assert part.model == "gpt-5.1-codex-max" and part.kind == "reasoning"


def test_recorded_non_streaming_body(recorded_dir: Path) -> None:
    """The recorded JSON body parses into reasoning, text, id and usage."""
    body = json.loads((recorded_dir / "openai-responses" /
                       "openai-reasoning-encrypted-content.1.json").read_text())
    response = parse_response_body(body)
    assert response.response_id == "resp_0f35ed53160b395301693cc957829881909359e7f80cdd20b5"
    reasoning, text = response.parts
    assert isinstance(reasoning, ReasoningPart)
    assert reasoning.text.startswith("**Reporting final result**")
    assert reasoning.data == body["output"][0]["encrypted_content"]
    assert reasoning.model == "gpt-5-mini-2025-08-07"
    assert text == TextPart(text="12 + 7 = 19\n19 × 3 = 57\n57 × 10 = 570\n\nFinal result: 570")
    assert response.usage == usage(865, 163, reasoning=128)
    assert response.finish_reason == "stop"


# --- handwritten streams (tests/data/openai-responses) -------------------------------

HANDWRITTEN: dict[str, Expected] = {
    "text.chunks.txt": Expected(response_id="resp_data0001", texts=("Hello there, friend.",),
                                usage=usage(12, 5), finish="stop"),
    "parallel-calls.chunks.txt": Expected(
        response_id="resp_data0002", texts=("Checking both.",),
        calls=(("call_data0001", "weather", '{"city":"Paris"}'),
               ("call_data0002", "weather", '{"city":"Oslo"}')),
        usage=usage(80, 40, cached=64), finish="tool_calls"),
    "incomplete.chunks.txt": Expected(response_id="resp_data0003", texts=("The answer is",),
                                      usage=usage(20, 3), finish="length"),
    "failed-server-error.chunks.txt": Expected(
        error=TransientProviderError, error_code="server_error",
        error_text="The server had an error"),
    "error-flat-cursor.chunks.txt": Expected(
        error=CursorRejected, error_code="previous_response_not_found",
        error_text="Previous response with id 'resp_gone' not found."),
    "error-nested-rate-limit.chunks.txt": Expected(
        error=RateLimited, error_code="rate_limit_exceeded", error_text="Rate limit reached"),
    "refusal.chunks.txt": Expected(response_id="resp_data0007",
                                   texts=("I can't help with that.",), usage=usage(9, 6),
                                   finish="refusal"),
    "reasoning-summary.chunks.txt": Expected(
        response_id="resp_data0008", texts=("Done.",),
        reasoning=(("First idea.\n\nSecond idea.", "gAAAA-complete-blob"),),
        usage=usage(30, 50, reasoning=40), finish="stop"),
    "compaction.chunks.txt": Expected(
        response_id="resp_data0010", texts=("Summary kept.",), usage=usage(2000, 10, 1800),
        finish="stop", metadata={"compacted": True, "compactionItemIds": ["cmp_data0001"]}),
    "call-without-item-done.chunks.txt": Expected(
        response_id="resp_data0011", calls=(("call_data0011", "lookup", '{"q":"tea"}'),),
        usage=usage(15, 8), finish="tool_calls"),
    "relay-untyped-error.chunks.txt": Expected(
        error=TransientProviderError, error_code="server_error",
        error_text="The server had an error"),
    "incomplete-content-filter.chunks.txt": Expected(
        response_id="resp_data_cf01", texts=("Partly ",), usage=usage(20, 2),
        finish="content_filter"),
    "unknown-item.chunks.txt": Expected(response_id="resp_data_unk01", texts=("Done.",),
                                        usage=usage(9, 3), finish="stop"),
}


def test_every_handwritten_stream_has_expectations() -> None:
    """Each data file is checked (the truncated one has its own test)."""
    names = {p.name for p in DATA.glob("*.chunks.txt")} - {"truncated.chunks.txt"}
    assert names == set(HANDWRITTEN)


@pytest.mark.parametrize("name", sorted(HANDWRITTEN))
def test_handwritten_stream(name: str) -> None:
    """Each handwritten stream yields what the wire reference says it should."""
    check(chunk_events(DATA / name), HANDWRITTEN[name])


def test_raw_sse_stream_with_done_sentinel() -> None:
    """Full frames (event lines, a comment, CRLF) end with a tolerated ``[DONE]``."""
    decoder = SseDecoder()
    events = decoder.feed((DATA / "text-with-done.sse").read_bytes())
    assert events[-1].data == "[DONE]"
    parser = ResponsesStreamParser()
    for event in events:
        parser.feed(event)
    assert parser.finish().parts == (TextPart(text="Hello there, friend."),)
    assert parser.finish().response_id == "resp_data0001"


def test_truncated_stream_fails_cleanly() -> None:
    """A stream that ends before its terminal event is a protocol error at finish."""
    parser = ResponsesStreamParser()
    deltas = [d for e in chunk_events(DATA / "truncated.chunks.txt") for d in parser.feed(e)]
    assert list(deltas) == [TextDelta(text="Cut")]
    assert not parser.done
    with pytest.raises(ProviderProtocolError, match=r"before response\.completed"):
        parser.finish()


def test_handwritten_non_streaming_bodies() -> None:
    """A completed body yields its call; a failed one raises its classified error."""
    response = parse_response_body(json.loads((DATA / "function-call.json").read_text()))
    assert response.tool_calls == (ToolCallPart(
        call_id="call_data0012", name="weather", arguments='{"city":"Rome"}',
        provider="openai", model="gpt-5-mini-2025-08-07"),)
    assert response.parts[0] == ReasoningPart(provider="openai", model="gpt-5-mini-2025-08-07",
                                              kind="reasoning", text="Need the weather.",
                                              signature="rs_data0012")
    assert response.finish_reason == "tool_calls" and response.usage == usage(45, 25, 0, 10)
    with pytest.raises(TransientProviderError, match="server had an error"):
        parse_response_body(json.loads((DATA / "failed.json").read_text()))


# --- frame-level rules ---------------------------------------------------------------


def test_malformed_frame_is_a_protocol_error() -> None:
    """Data that is not JSON, or not an object, breaks the wire format."""
    parser = ResponsesStreamParser()
    with pytest.raises(ProviderProtocolError, match="malformed frame"):
        parser.feed(SseEvent(event="response.output_text.delta", data='{"type": "resp'))
    with pytest.raises(ProviderProtocolError, match="not a JSON object"):
        parser.feed(SseEvent(event="response.output_text.delta", data="[1, 2]"))


def test_unknown_events_are_ignored() -> None:
    """Events the parser does not know change nothing."""
    parser = ResponsesStreamParser()
    assert parser.feed(SseEvent(event="response.web_search_call.searching",
                                data='{"type":"response.web_search_call.searching"}')) == ()
    assert parser.feed(SseEvent(data='{"type":"response.audio.delta","delta":"AAA"}')) == ()
    assert not parser.done


def test_event_name_is_used_when_the_payload_has_no_type() -> None:
    """A frame without ``type`` is dispatched by its SSE event name."""
    parser = ResponsesStreamParser()
    deltas = parser.feed(SseEvent(event="response.output_text.delta",
                                  data='{"output_index":0,"delta":"hi"}'))
    assert list(deltas) == [TextDelta(text="hi")]


def test_text_done_streams_what_the_deltas_missed() -> None:
    """``output_text.done`` longer than the deltas streams the remainder, once."""
    parser = ResponsesStreamParser()
    parser.feed(SseEvent(data='{"type":"response.output_text.delta","output_index":0,'
                              '"delta":"Hel"}'))
    done = '{"type":"response.output_text.done","output_index":0,"text":"Hello"}'
    assert list(parser.feed(SseEvent(data=done))) == [TextDelta(text="lo")]
    assert list(parser.feed(SseEvent(data=done))) == []


@pytest.mark.parametrize("index", [-1, -3])
def test_a_negative_output_index_never_claims_a_terminal_item(index: int) -> None:
    """An item streamed at a negative ``output_index`` is matched to the terminal output
    by id only: not by Python's negative indexing, which took the last terminal item
    (so it appeared twice) or raised ``IndexError`` past the list's front."""
    item = {"type": "message", "id": "streamed", "role": "assistant", "content": []}
    final = {"type": "message", "id": "other", "role": "assistant",
             "content": [{"type": "output_text", "text": "kept", "annotations": []}]}
    parser = ResponsesStreamParser()
    for frame in (
        {"type": "response.output_item.added", "output_index": index, "item": item},
        {"type": "response.output_text.delta", "output_index": index, "delta": "hi"},
        {"type": "response.completed",
         "response": {"id": "resp_1", "status": "completed", "output": [final]}},
    ):
        parser.feed(SseEvent(event=str(frame["type"]), data=json.dumps(frame)))
    texts = [part.text for part in parser.finish().parts if isinstance(part, TextPart)]
    assert texts == ["hi", "kept"]
