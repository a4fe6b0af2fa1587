"""The Gemini Interactions corpus: parts, finish, usage and the stateless replay."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.providers.corpus import Case, case_names, check, events, history, usage
from turnstate.core._decisions import Strategy
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers import GeminiInteractionsAdapter, ProviderCall, ProviderResponse
from turnstate.providers.gemini_interactions import InteractionsStreamParser

PROTOCOL = "gemini-interactions"
ADAPTER = GeminiInteractionsAdapter(base_url="http://127.0.0.1:1/v1beta", api_key="k")
MODEL = DEFAULT_REGISTRY.model("gemini", "gemini-3-flash-preview")


def replay(response: ProviderResponse) -> list[Any]:
    """Multi-turn without ``previous_interaction_id``: the steps sent for the response."""
    call = ProviderCall(strategy=Strategy.REPLAY, model=MODEL, system_prompt="", tools=(),
                        history=history("q", response.parts), user_text="next")
    body = json.loads(ADAPTER.build_request(call).body)
    assert "previous_interaction_id" not in body
    steps: list[Any] = body["input"]
    assert steps[0] == {"type": "user_input", "content": [{"type": "text", "text": "q"}]}
    return steps[1:-1]


SEARCH_CALL = {"type": "google_search_call", "id": "gs1",
               "arguments": {"queries": ["lyon weather"]}}
SEARCH_RESULT = {"type": "google_search_result", "call_id": "gs1",
                 "result": [{"title": "Lyon forecast", "url": "https://weather.example/lyon"}]}

CASES: dict[str, Case] = {
    "thought-signature-on-call": Case(
        response_id="v1_sig01",
        parts=(("reasoning", "thought", "", "CtoBthought==", None),
               ("call", "fc1", "weather", '{"city": "Paris"}', "CpQBcall=="),
               ("call", "fc2", "get_time", "{}")),
        finish="tool_calls", usage=usage(40, 94, reasoning=64),
        replay=({"type": "thought", "signature": "CtoBthought=="},
                {"type": "function_call", "id": "fc1", "name": "weather",
                 "arguments": {"city": "Paris"}, "signature": "CpQBcall=="},
                {"type": "function_call", "id": "fc2", "name": "get_time", "arguments": {}})),
    "thought-signature-on-text": Case(
        response_id="v1_sigtxt01",
        parts=(("text", "It is sunny."),
               ("reasoning", "text_signature", "", "CvQBtext==", None),
               ("text", " Anything else?")),
        finish="stop", usage=usage(12, 39, reasoning=30),
        replay=({"type": "model_output", "content": [{"type": "text", "text": "It is sunny."}],
                 "signature": "CvQBtext=="},
                {"type": "model_output",
                 "content": [{"type": "text", "text": " Anything else?"}]})),
    "google-search-steps": Case(
        parts=(("opaque", "google_search_call", SEARCH_CALL),
               ("opaque", "google_search_result", SEARCH_RESULT), ("text", "Lyon is sunny.")),
        finish="stop", usage=usage(200, 12),
        replay=(SEARCH_CALL, SEARCH_RESULT,
                {"type": "model_output", "content": [{"type": "text", "text": "Lyon is sunny."}]})),
    "incomplete-duplicate-created": Case(
        response_id="v1_inc01", parts=(("text", "The long answer starts"),), finish="length",
        usage=usage(20, 8),
        replay=({"type": "model_output",
                 "content": [{"type": "text", "text": "The long answer starts"}]},)),
}


def test_every_corpus_stream_has_a_case() -> None:
    assert case_names(PROTOCOL) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_stream(name: str) -> None:
    check(InteractionsStreamParser(), events(PROTOCOL, name, event_key="event_type"),
          CASES[name], replay)


def test_text_signature_goes_back_only_to_the_same_model() -> None:
    """A signed ``model_output`` step replayed to another model loses its signature (the
    text stays); to the same model it keeps it on that step and no other."""
    parser = InteractionsStreamParser()
    response = check(parser, events(PROTOCOL, "thought-signature-on-text",
                                    event_key="event_type"),
                     CASES["thought-signature-on-text"])
    assert response is not None
    other = DEFAULT_REGISTRY.model("gemini", "gemini-2.5-pro")
    call = ProviderCall(strategy=Strategy.REPLAY, model=other, system_prompt="", tools=(),
                        history=history("q", response.parts), user_text="next")
    steps = json.loads(ADAPTER.build_request(call).body)["input"][1:-1]
    assert steps == [{"type": "model_output", "content": [{"type": "text", "text": text}]}
                     for text in ("It is sunny.", " Anything else?")]
