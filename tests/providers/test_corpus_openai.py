"""The OpenAI Responses corpus: each stream's parts, finish, usage and replay."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.providers.corpus import Case, case_names, check, events, history, usage
from turnstate.core._decisions import Strategy
from turnstate.core._errors import ProviderProtocolError
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers import ProviderCall, ProviderResponse
from turnstate.providers.openai_responses import OpenAIResponsesAdapter, ResponsesStreamParser

PROTOCOL = "openai-responses"
ADAPTER = OpenAIResponsesAdapter(base_url="http://127.0.0.1:1/v1", api_key="sk-test",
                                 include_encrypted_reasoning=True)
MODEL5 = DEFAULT_REGISTRY.model("openai", "gpt-5-mini")


def replay(response: ProviderResponse) -> list[Any]:
    """The input items the next replay request sends for the response's parts."""
    call = ProviderCall(strategy=Strategy.REPLAY, model=MODEL5, system_prompt="",
                        tools=(), history=history("q", response.parts), user_text="next")
    items: list[Any] = json.loads(ADAPTER.build_request(call).body)["input"]
    return items[1:-1]


CASES: dict[str, Case] = {
    "relay-changing-ids": Case(
        response_id="resp_relay01",
        parts=(("reasoning", "reasoning", "Check the units.", None, "gAAAArelay"),
               ("text", "It is 12 km.")),
        finish="stop", usage=usage(30, 12, reasoning=6),
        replay=({"type": "reasoning", "summary": [{"type": "summary_text",
                                                   "text": "Check the units."}],
                 "encrypted_content": "gAAAArelay"},
                {"type": "message", "role": "assistant", "content": "It is 12 km."})),
    "multi-tool-use-parallel": Case(error=ProviderProtocolError,
                                    error_text="multi_tool_use.parallel"),
}


def test_every_corpus_stream_has_a_case() -> None:
    assert case_names(PROTOCOL) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_stream(name: str) -> None:
    check(ResponsesStreamParser(), events(PROTOCOL, name), CASES[name], replay)
