"""A chat whose history holds a tool call with arguments Python's JSON reader takes but
no request can carry (``NaN``, ``Infinity``, ``1e999``, a lone surrogate escape) can
still be sent to Anthropic and Gemini.

Both send a call's arguments back as a JSON object, decoded from the arguments text.
A model on any provider that wrote ``{"city": NaN}`` got a tool error, and its turn
committed; from then on every Anthropic or Gemini request for the chat failed to build
("could not build the request: ValueError: Out of range float values are not JSON
compliant", or ``UnicodeEncodeError`` for ``"\\ud800"``), and so did the Anthropic
turn's own next tool-loop request. Such arguments are now sent as each codec sends
arguments that are not JSON: ``{}`` for Anthropic, ``{"arguments": text}`` for Gemini.
"""

from __future__ import annotations

import json

import pytest

from tests.providers.corpus import history
from turnstate.core._conversation import ToolCallPart, ToolResultPart
from turnstate.core._decisions import Strategy
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers import (
    AnthropicAdapter,
    GeminiInteractionsAdapter,
    ProviderAdapter,
    ProviderCall,
)

ADAPTERS: dict[str, tuple[ProviderAdapter, str]] = {
    "anthropic": (AnthropicAdapter(base_url="http://127.0.0.1:1/v1", api_key="k"),
                  "claude-sonnet-4-5"),
    "gemini": (GeminiInteractionsAdapter(base_url="http://127.0.0.1:1", api_key="k"),
               "gemini-2.5-flash"),
}


def refuse(name: str) -> None:
    raise ValueError(name)


@pytest.mark.parametrize("provider", sorted(ADAPTERS))
@pytest.mark.parametrize("arguments", [
    '{"city": NaN}', '{"city": -Infinity}', '{"city": 1e999}', '{"city": "\\ud800"}',
    '{"city": "\\udc00x"}', "NaN", "1e999", '"\\ud83d"',
])
def test_a_replayed_call_whose_arguments_cannot_be_sent_back_builds(
        provider: str, arguments: str) -> None:
    adapter, model = ADAPTERS[provider]
    call = ToolCallPart(call_id="call_1", name="weather", arguments=arguments,
                        provider="openai-compatible", model="gpt-4o-mini")
    result = ToolResultPart(call_id="call_1", name="weather", output='{"error":"bad"}',
                            is_error=True)
    request = adapter.build_request(ProviderCall(
        strategy=Strategy.REPLAY, model=DEFAULT_REGISTRY.model(provider, model),
        system_prompt="", tools=(), history=history("q", (call, result)), user_text="again"))
    body = json.loads(request.body.decode("utf-8"), parse_constant=refuse)
    assert "call_1" in json.dumps(body)
