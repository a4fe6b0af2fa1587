"""A response billed at another service tier than the list price's (money, 2026-12-04):
OpenAI bills a project set to ``flex`` or ``priority`` at those rates when a request asks
``auto`` (turnstate sends no tier), Anthropic's usage names ``priority`` or ``batch``,
Gemini's interaction names its tier. Every parser now puts a tier the list price does not
cover in the response's metadata (``serviceTier``), and the turn has no cost (it was
priced at the standard tier's list price). The recorded streams, all at the standard
tier, name none."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import chunk_events
from turnstate.core._cost import tier_metadata
from turnstate.providers._protocol import ProviderResponse, SseEvent, StreamParser
from turnstate.providers.anthropic import AnthropicStreamParser
from turnstate.providers.chat_completions._stream import ChatCompletionsStreamParser
from turnstate.providers.gemini_interactions._parser import InteractionsStreamParser
from turnstate.providers.openai_responses._parser import ResponsesStreamParser

STREAMS = {  # file, event key, parser, the standard tier's text in the stream
    "openai": ("openai-responses/azure-tool-call.1.chunks.txt", "type",
               ResponsesStreamParser, '"service_tier":"default"'),
    "anthropic": ("anthropic/anthropic-text.chunks.txt", "type", AnthropicStreamParser,
                  '"service_tier":"standard"'),
    "gemini": ("gemini-interactions/basic.chunks.txt", "event_type",
               InteractionsStreamParser, '"service_tier":"standard"'),
    "chat": ("chat-completions/openai-text.chunks.txt", None,
             lambda: ChatCompletionsStreamParser("openai-compatible"),
             '"service_tier":"default"'),
}


def parsed(events: list[SseEvent], make: object) -> ProviderResponse:
    parser: StreamParser = make()  # type: ignore[operator]
    for event in events:
        parser.feed(event)
        if parser.done:
            break
    return parser.finish()


@pytest.mark.parametrize("name", list(STREAMS))
def test_the_standard_tier_is_the_list_price(recorded_dir: Path, name: str) -> None:
    path, key, make, _ = STREAMS[name]
    response = parsed(chunk_events(recorded_dir / path, event_key=key), make)
    assert "serviceTier" not in response.metadata


@pytest.mark.parametrize("name", list(STREAMS))
def test_another_tier_is_named(recorded_dir: Path, name: str) -> None:
    path, key, make, standard = STREAMS[name]
    events = chunk_events(recorded_dir / path, event_key=key)
    assert any(standard in e.data for e in events)
    tier = '"service_tier":"priority"'
    events = [SseEvent(data=e.data.replace(standard, tier), event=e.event, id=e.id)
              for e in events]
    response = parsed(events, make)
    assert response.metadata["serviceTier"] == "priority"


def test_which_tiers_the_list_price_covers() -> None:
    assert [tier_metadata(t) for t in ("default", "standard", "auto", None, 3, "")] == [{}] * 6
    assert tier_metadata("flex") == {"serviceTier": "flex"}
    assert tier_metadata("batch") == {"serviceTier": "batch"}


DATA = Path(__file__).resolve().parent / "data"
SERVER_TOOLS = {  # a stream whose answer used the provider's own tool, and the calls made
    "openai": ("openai-responses/web-search-call-with-citations.chunks.txt", "type",
               ResponsesStreamParser),
    "anthropic": ("anthropic/server-tool-web-search.chunks.txt", "type",
                  AnthropicStreamParser),
    "gemini": ("gemini-interactions/google-search-steps.chunks.txt", "event_type",
               InteractionsStreamParser),
}


@pytest.mark.parametrize("name", list(SERVER_TOOLS))
def test_calls_of_the_providers_own_tools_are_counted(name: str) -> None:
    """A web search (OpenAI $10 per 1,000 calls, Anthropic $10 per 1,000 searches, a
    Gemini grounded prompt or query) is billed beside the tokens, at fees the registry
    does not list: the response counts the calls, and its turn has no cost."""
    path, key, make = SERVER_TOOLS[name]
    response = parsed(chunk_events(DATA / path, event_key=key), make)
    assert response.metadata["serverToolCalls"] == 1


def test_a_turn_with_a_server_tool_call_has_no_cost() -> None:
    from turnstate.core._cost import audit_cost_text
    from turnstate.engine._run_bill import _unpriced

    assert _unpriced({"serverToolCalls": 1}) and _unpriced({"serviceTier": "flex"})
    assert not _unpriced({"compacted": True})
    text = '{"metadata":{"serverToolCalls":2}}'
    assert audit_cost_text(text).startswith("n/a (2 call(s) of the provider's own tools")
