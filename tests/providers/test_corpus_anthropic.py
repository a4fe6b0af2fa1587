"""The Anthropic Messages corpus: each stream's parts, finish, usage and loop replay."""

from __future__ import annotations

from typing import Any

import pytest

from tests.providers.corpus import Case, case_names, check, events, results_for, usage
from turnstate.core._decisions import Strategy
from turnstate.core._errors import ProviderProtocolError
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers import AnthropicAdapter, ProviderCall, ProviderResponse
from turnstate.providers.anthropic import AnthropicStreamParser

PROTOCOL = "anthropic"
ADAPTER = AnthropicAdapter(base_url="http://127.0.0.1:1/v1", api_key="k")
MODEL = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")
CALL = ProviderCall(strategy=Strategy.LOCAL_LOOP, model=MODEL, system_prompt="", tools=(),
                    user_text="q")


def replay(response: ProviderResponse) -> tuple[Any, ...]:
    """The messages the next request of the tool loop sends for this response."""
    return ADAPTER.extend_loop(CALL, response, results_for(response))


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


CASES: dict[str, Case] = {
    "relay-second-message-start": Case(error=ProviderProtocolError,
                                       error_text="a second message_start"),
    "relay-complete-message-start": Case(
        response_id="msg_01RelayWhole",
        parts=(("text", "Let me check the weather."),
               ("call", "toolu_01RelayWhole", "weather", '{"city":"Lyon"}')),
        finish="tool_calls", usage=usage(310, 52),
        replay=({"role": "assistant", "content": [
                    text("Let me check the weather."),
                    {"type": "tool_use", "id": "toolu_01RelayWhole", "name": "weather",
                     "input": {"city": "Lyon"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01RelayWhole",
                     "content": "ok:weather", "is_error": False}]})),
    "duplicate-message-start": Case(
        response_id="msg_01Dup", parts=(("text", "Hello again."),), finish="stop",
        usage=usage(12, 4),
        replay=({"role": "assistant", "content": [text("Hello again.")]},)),
}


def test_every_corpus_stream_has_a_case() -> None:
    assert case_names(PROTOCOL) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_stream(name: str) -> None:
    check(AnthropicStreamParser(), events(PROTOCOL, name), CASES[name], replay)
