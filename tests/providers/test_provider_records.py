"""The provider code's per-call records are made without attrs' ``__init__`` (issue 26):
the request (the codec's and the budgeted copy), the response, its answer part and usage,
and the envelope, each equal to the attrs-built record, with converters and validators
applied as ``__init__`` applies them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import attrs
import pytest

from tests.helpers import count_inits
from turnstate.core._conversation import TextPart, Usage
from turnstate.core._decisions import TurnContext
from turnstate.core._envelope import ContinuationEnvelope, Mode
from turnstate.core._errors import ConfigurationError
from turnstate.providers import _boundary
from turnstate.providers._envelopes import _envelope, standard_envelope
from turnstate.providers._protocol import (
    AttemptBudget,
    HttpRequest,
    ProviderResponse,
    http_request,
    provider_response,
)
from turnstate.providers._requests import json_request
from turnstate.providers._sse import SseDecoder
from turnstate.providers.openai_responses._assemble import usage_of
from turnstate.providers.openai_responses._parser import ResponsesStreamParser

_RECORDS = (HttpRequest, ProviderResponse, ContinuationEnvelope, TextPart, Usage)


def _same(made: Any, built: Any) -> None:
    assert type(made) is type(built)
    assert made == built and repr(made) == repr(built)
    assert attrs.asdict(made, recurse=False) == attrs.asdict(built, recurse=False)


def _stream(text: str) -> bytes:
    item = {"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "annotations": [], "text": text}]}
    usage = {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 3},
             "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 2},
             "total_tokens": 19}
    frames = [
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**item, "status": "in_progress", "content": []}},
        {"type": "response.output_text.delta", "output_index": 0, "delta": text[:4]},
        {"type": "response.output_text.delta", "output_index": 0, "delta": text[4:]},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {
            "id": "resp_1", "model": "gpt-4o", "status": "completed", "output": [item],
            "usage": usage}},
    ]
    return b"".join(f"event: {f['type']}\ndata: {json.dumps(f)}\n\n".encode() for f in frames)


def test_a_call_s_provider_records_are_made_without_attrs_init(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Building the request, budgeting it, parsing the stream into the response and
    taking its envelope calls none of these classes' ``__init__`` (the code before built
    the request twice, the response, its text part and usage and the envelope through it)."""
    built = count_inits(monkeypatch, _RECORDS)
    request = json_request("openai", "http://x/v1/responses", {"authorization": "k"},
                           {"model": "gpt-4o"})
    budgeted = _boundary._budgeted(request, AttemptBudget())
    parser = ResponsesStreamParser()
    for event in SseDecoder().feed(_stream("Hello there")):
        parser.feed(event)
    response = parser.finish()
    ctx = TurnContext(provider="openai", model_name="gpt-4o", system_prompt_hash="s",
                      toolset_hash="t", committed_seq=2, now=datetime.now(UTC))
    envelope = standard_envelope(ctx, Mode.RESPONSES, response, loop_messages=(),
                                 now=ctx.now, covers_seq=3)
    assert built == []
    assert budgeted.body == b'{"model":"gpt-4o"}' and response.parts == (
        TextPart(text="Hello there"),)
    assert envelope.cursor == "resp_1" and response.usage == Usage(
        input_tokens=12, output_tokens=7, cached_input_tokens=3, reasoning_tokens=2)


def test_the_request_and_response_makers_equal_the_attrs_records() -> None:
    budget = AttemptBudget()
    headers = {"content-type": "application/json"}
    _same(http_request("POST", "http://x", headers, b"{}", "openai", budget),
          HttpRequest(method="POST", url="http://x", headers=headers, body=b"{}",
                      provider="openai", budget=budget))
    usage = Usage(input_tokens=1)
    for parts in ([TextPart(text="a")], (), [TextPart(text="a"), TextPart(text="b")]):
        made = provider_response("r", parts, usage, "stop", {"k": 1}, None, None)
        _same(made, ProviderResponse(response_id="r", parts=parts, usage=usage,
                                     finish_reason="stop", metadata={"k": 1}))
        assert type(made.parts) is tuple  # the converter ran


@pytest.mark.parametrize("usage", [
    None, [], {"input_tokens": 5}, {"input_tokens": True, "output_tokens": 2.0},
    {"input_tokens_details": [], "output_tokens_details": "x"},
    {"input_tokens": 9, "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 1},
     "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 2}},
])
def test_usage_of_is_the_usage_the_fields_say(usage: Any) -> None:
    details = usage if isinstance(usage, dict) else {}
    inputs = details.get("input_tokens_details")
    outputs = details.get("output_tokens_details")
    inputs = inputs if isinstance(inputs, dict) else {}
    outputs = outputs if isinstance(outputs, dict) else {}

    def count(value: Any) -> int:
        return value if type(value) is int else 0

    expected = Usage() if not isinstance(usage, dict) else Usage(
        input_tokens=count(details.get("input_tokens")),
        output_tokens=count(details.get("output_tokens")),
        cached_input_tokens=count(inputs.get("cached_tokens")),
        cache_write_tokens=count(inputs.get("cache_write_tokens")),
        reasoning_tokens=count(outputs.get("reasoning_tokens")))
    _same(usage_of(usage), expected)


def test_the_envelope_maker_converts_and_validates_as_init() -> None:
    offset = datetime(2026, 1, 2, 3, 4, tzinfo=timezone(timedelta(hours=2)))
    for created in (None, datetime(2026, 1, 2, tzinfo=UTC), offset):
        for loop in (None, [{"a": 1}], ()):
            made = _envelope("openai", Mode.RESPONSES, "m", "s", "t", "c", created,
                             4, None, loop, 1)
            _same(made, ContinuationEnvelope(
                provider="openai", mode=Mode.RESPONSES, model_name="m",
                system_prompt_hash="s", toolset_hash="t", cursor="c", created_at=created,
                covers_seq=4, loop_messages=loop))
    with pytest.raises(ConfigurationError, match="must be an aware datetime"):
        _envelope("openai", Mode.RESPONSES, "m", "s", "t", "c",
                  datetime(2026, 1, 2), 4, None, None, 1)
