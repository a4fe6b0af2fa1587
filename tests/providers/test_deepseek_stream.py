"""DeepSeek stream and body parsing: reasoning, tool calls, cache usage, error classification."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.conftest import DATA_DIR
from tests.helpers import chunk_events
from turnstate.core._conversation import ReasoningPart, TextPart, ToolCallPart, Usage
from turnstate.core._errors import FatalProviderError, RateLimited, TransientProviderError
from turnstate.providers._protocol import ProviderResponse, ReasoningDelta, TextDelta
from turnstate.providers.deepseek import DeepSeekAdapter, parse_response_body

DATA = DATA_DIR / "deepseek"


def parse(path: Path) -> tuple[ProviderResponse, list[object]]:
    parser = DeepSeekAdapter().stream_parser()
    deltas: list[object] = []
    for event in chunk_events(path, event_key=None):
        deltas.extend(parser.feed(event))
    assert parser.done  # usage rides on the finish_reason chunk: complete without [DONE]
    return parser.finish(), deltas


def test_recorded_reasoning_stream(recorded_dir: Path) -> None:
    """The recorded deepseek-reasoner stream yields reasoning, then text, and cache usage."""
    response, deltas = parse(recorded_dir / "deepseek" / "deepseek-reasoning.chunks.txt")
    reasoning, text = response.parts
    assert isinstance(reasoning, ReasoningPart)
    assert (reasoning.provider, reasoning.model, reasoning.kind) == (
        "deepseek", "deepseek-reasoner", "reasoning_content")
    assert reasoning.text.startswith('We need to count the number of the letter "r"')
    assert len(reasoning.text) == 606
    assert text == TextPart(text='The word "strawberry" contains three "r"s.')
    kinds = [type(d) for d in deltas]
    assert kinds.index(TextDelta) > kinds.index(ReasoningDelta)
    assert response.response_id == "cac7192e-e619-40c6-96b0-ed4276bc03ac"
    assert response.finish_reason == "stop"
    assert response.usage == Usage(input_tokens=18, output_tokens=219, reasoning_tokens=205,
                                   cache_hit_tokens=0, cache_miss_tokens=18)
    assert response.metadata == {"promptCacheHitTokens": 0,
                                 "promptCacheMissTokens": 18}


def test_recorded_text_stream(recorded_dir: Path) -> None:
    """The recorded deepseek-chat stream yields text cut at the length limit."""
    response, deltas = parse(recorded_dir / "deepseek" / "deepseek-text.chunks.txt")
    (text,) = response.parts
    assert isinstance(text, TextPart)
    assert text.text.startswith("## **Holiday Name:** Starlight Remembrance")
    assert text.text.endswith("silent looking at") and len(text.text) == 1855
    assert len(deltas) == 400
    assert response.finish_reason == "length"
    assert response.usage == Usage(input_tokens=13, output_tokens=400,
                                   cache_hit_tokens=0, cache_miss_tokens=13)


def test_recorded_reasoning_body(recorded_dir: Path) -> None:
    """The recorded non-streaming reasoner body yields reasoning, text and usage."""
    body = json.loads((recorded_dir / "deepseek" / "deepseek-reasoning.json").read_text())
    response = parse_response_body(body)
    reasoning, text = response.parts
    assert isinstance(reasoning, ReasoningPart) and len(reasoning.text) == 935
    assert isinstance(text, TextPart) and text.text.startswith('The word "strawberry" contains')
    assert response.usage == Usage(input_tokens=18, output_tokens=345, reasoning_tokens=315,
                                   cache_hit_tokens=0, cache_miss_tokens=18)


def test_thinking_tool_call_stream_with_cache_hits() -> None:
    """Reasoning, a fragmented call and hit/miss usage on the finish_reason chunk."""
    response, deltas = parse(DATA / "tool-call-reasoning.chunks.txt")
    reasoning, call = response.parts
    assert reasoning.text == "The user asks about the weather. I'll call the weather tool."
    assert call == ToolCallPart(call_id="call_00_lCIkq", name="weather",
                                arguments='{"location": "San Francisco"}', provider="deepseek",
                                model="deepseek-v4-flash")
    assert [type(d) for d in deltas] == [ReasoningDelta, ReasoningDelta]
    assert response.usage == Usage(
        input_tokens=374, output_tokens=60, cached_input_tokens=256, reasoning_tokens=16,
        cache_hit_tokens=256, cache_miss_tokens=118)
    assert response.metadata == {"promptCacheHitTokens": 256,
                                 "promptCacheMissTokens": 118}
    assert response.finish_reason == "tool_calls"


def test_thinking_tool_call_body() -> None:
    """The non-streaming thinking + tool call body from the wire reference."""
    response = parse_response_body(json.loads((DATA / "tool-call.json").read_text()))
    reasoning, call = response.parts
    assert isinstance(reasoning, ReasoningPart) and reasoning.text.endswith("weather tool.")
    assert isinstance(call, ToolCallPart) and call.arguments == '{"location": "San Francisco"}'
    assert response.usage.cache_miss_tokens == 374
    assert response.usage.cached_input_tokens == 0


def test_usage_without_cache_fields_leaves_them_unset() -> None:
    """An OpenAI-style usage object gives None cache counts and no metadata."""
    usage, metadata = DeepSeekAdapter().read_usage({"prompt_tokens": 5, "completion_tokens": 1})
    assert usage == Usage(input_tokens=5, output_tokens=1)
    assert metadata == {}


@pytest.mark.parametrize("name", ["error-v4-reasoning.json", "error-v32-reasoning.json"])
def test_missing_reasoning_400_is_fatal_and_a_bug(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The reasoning_content 400s are fatal and logged as turnstate bugs."""
    with caplog.at_level(logging.ERROR, logger="turnstate"):
        error = DeepSeekAdapter().classify_error(400, {}, (DATA / name).read_bytes())
    assert type(error) is FatalProviderError and error.code == "invalid_request_error"
    assert "`reasoning_content`" in error.detail
    assert [r.levelno for r in caplog.records] == [logging.ERROR]
    assert "[provider][bug] deepseek" in caplog.records[0].getMessage()


def test_tool_pairing_400_is_a_bug_too(caplog: pytest.LogCaptureFixture) -> None:
    """DeepSeek inherits the Chat Completions tool-pairing markers."""
    body = (DATA_DIR / "chat-completions" / "error-unanswered-tool-call.json").read_bytes()
    with caplog.at_level(logging.ERROR, logger="turnstate"):
        error = DeepSeekAdapter().classify_error(400, {}, body)
    assert type(error) is FatalProviderError and len(caplog.records) == 1


@pytest.mark.parametrize(("status", "kind"), [
    (402, FatalProviderError), (429, RateLimited), (500, TransientProviderError),
    (503, TransientProviderError), (401, FatalProviderError), (422, FatalProviderError)])
def test_status_classification(status: int, kind: type[Exception]) -> None:
    """DeepSeek's documented statuses: 429 and 5xx retry, the rest is fatal."""
    body = (DATA / "error-insufficient-balance.json").read_bytes()
    error = DeepSeekAdapter().classify_error(status, {"retry-after": "1"}, body)
    assert type(error) is kind and error.status == status


def test_numeric_error_code_is_kept_as_text() -> None:
    """DeepSeek's ``code`` may be a number; it becomes the error's code string."""
    error = DeepSeekAdapter().classify_error(
        500, {}, b'{"error":{"message":"Server error","type":"api_error","code":500}}')
    assert error.code == "500" and isinstance(error, TransientProviderError)


def test_every_recorded_file_parses(recorded_dir: Path) -> None:
    """Every recorded DeepSeek stream completes with cache usage; every body parses."""
    folder = recorded_dir / "deepseek"
    streams, bodies = sorted(folder.glob("*.chunks.txt")), sorted(folder.glob("*.json"))
    assert streams and bodies
    for path in streams:
        response, _ = parse(path)
        assert response.parts and response.usage.cache_miss_tokens is not None, path.name
    for path in bodies:
        assert parse_response_body(json.loads(path.read_text())).parts, path.name
