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
    # Less the user's two messages (a compaction item replaces the first).
    return items[1:-1] if items[0] == {"type": "message", "role": "user",
                                       "content": "q"} else items[:-1]


def function_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def assistant(text: str, **extra: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": text, **extra}


WEB_SEARCH = {"id": "ws_01", "type": "web_search_call", "status": "completed",
              "action": {"type": "search", "query": "Lyon weather today"}}
FILE_SEARCH = {"id": "fs_01", "type": "file_search_call", "status": "completed",
               "queries": ["refund policy"], "results": None}
CODE_INTERPRETER = {"id": "ci_01", "type": "code_interpreter_call", "status": "completed",
                    "code": "print(6*7)", "container_id": "cntr_01",
                    "outputs": [{"type": "logs", "logs": "42\n"}]}

COMPACTION_ITEM = {"id": "cmp_01abc", "type": "compaction",
                   "encrypted_content": "gAAAAABplLMg-whole==", "created_by": "system"}

CASES: dict[str, Case] = {
    "compaction-after-message": Case(
        response_id="resp_cmp01",
        parts=(("text", "Unit tests check one function; E2E tests drive the whole app."),
               ("opaque", "compaction", COMPACTION_ITEM)),
        finish="stop", usage=usage(210000, 20, cached=180000),
        # A stateless chain starts at the compaction item: the message before it (and the
        # user's message before that) are left out, and so are its id and created_by.
        replay=({"type": "compaction", "encrypted_content": "gAAAAABplLMg-whole=="},)),
    "relay-changing-ids": Case(
        response_id="resp_relay01",
        parts=(("reasoning", "reasoning", "Check the units.", "rs_relayA9", "gAAAArelay"),
               ("text", "It is 12 km.")),
        finish="stop", usage=usage(30, 12, reasoning=6),
        replay=({"type": "reasoning", "id": "rs_relayA9", "summary": [{"type": "summary_text",
                                                   "text": "Check the units."}],
                 "encrypted_content": "gAAAArelay"},
                {"type": "message", "role": "assistant", "content": "It is 12 km."})),
    "multi-tool-use-parallel": Case(error=ProviderProtocolError,
                                    error_text="multi_tool_use.parallel"),
    "parallel-calls-interleaved": Case(
        response_id="resp_par01",
        parts=(("call", "call_par1", "weather", '{"city":"Paris"}'),
               ("call", "call_par2", "weather", '{"city":"Oslo"}')),
        finish="tool_calls", usage=usage(60, 30),
        replay=(function_call("call_par1", "weather", '{"city":"Paris"}'),
                function_call("call_par2", "weather", '{"city":"Oslo"}'))),
    "tool-without-arguments": Case(
        parts=(("call", "call_noarg", "get_time", "{}"),), finish="tool_calls",
        usage=usage(20, 5), replay=(function_call("call_noarg", "get_time", "{}"),)),
    "duplicate-created-unknown-events": Case(
        response_id="resp_dup01", parts=(("text", "Hi there."),), finish="stop",
        usage=usage(8, 3), replay=(assistant("Hi there."),)),
    "reasoning-encrypted-content": Case(
        parts=(("reasoning", "reasoning", "Need the weather.", "rs_enc01", "gAAAAenc-full"),
               ("call", "call_enc01", "weather", '{"city":"Paris"}')),
        finish="tool_calls", usage=usage(70, 40, reasoning=24),
        replay=({"type": "reasoning", "id": "rs_enc01", "encrypted_content": "gAAAAenc-full",
                 "summary": [{"type": "summary_text", "text": "Need the weather."}]},
                function_call("call_enc01", "weather", '{"city":"Paris"}'))),
    "web-search-call-with-citations": Case(
        parts=(("opaque", "web_search_call", WEB_SEARCH), ("text", "Lyon is sunny.")),
        finish="stop", usage=usage(300, 25),
        replay=(WEB_SEARCH, assistant("Lyon is sunny."))),
    "file-search-and-code-interpreter": Case(
        parts=(("opaque", "file_search_call", FILE_SEARCH),
               ("opaque", "code_interpreter_call", CODE_INTERPRETER),
               ("text", "Refunds take 14 days; 6*7 is 42.")),
        finish="stop", usage=usage(500, 60, cached=256),
        replay=(FILE_SEARCH, CODE_INTERPRETER, assistant("Refunds take 14 days; 6*7 is 42."))),
    "refusal": Case(parts=(("text", "I can't help with that."),), finish="refusal",
                    usage=usage(15, 7), replay=(assistant("I can't help with that."),)),
    "incomplete-max-output-tokens": Case(
        parts=(("text", "The three causes are"),), finish="length",
        usage=usage(40, 64, reasoning=58), replay=(assistant("The three causes are"),)),
    "phase-commentary-final": Case(
        parts=(("text", "Checking the sources now.", "commentary"),
               ("text", "Here is the summary.", "final_answer")),
        finish="stop", usage=usage(90, 20),
        replay=(assistant("Checking the sources now.", phase="commentary"),
                assistant("Here is the summary.", phase="final_answer"))),
}


def test_every_corpus_stream_has_a_case() -> None:
    assert case_names(PROTOCOL) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_stream(name: str) -> None:
    check(ResponsesStreamParser(), events(PROTOCOL, name), CASES[name], replay)


def test_opaque_items_go_back_only_to_the_model_that_made_them() -> None:
    """A built-in tool item from another model (or provider) is not replayed."""
    response = check(ResponsesStreamParser(), events(PROTOCOL, "web-search-call-with-citations"),
                     CASES["web-search-call-with-citations"])
    assert response is not None
    other = ProviderCall(strategy=Strategy.REPLAY, tools=(), system_prompt="",
                         model=DEFAULT_REGISTRY.model("openai", "gpt-4.1"),
                         history=history("q", response.parts), user_text="next")
    items = json.loads(ADAPTER.build_request(other).body)["input"]
    assert [item.get("type") for item in items] == ["message", "message", "message"]


def test_encrypted_reasoning_is_asked_for() -> None:
    """The adapter that replays encrypted reasoning asks for it on every request."""
    call = ProviderCall(strategy=Strategy.REPLAY, model=MODEL5, system_prompt="", tools=(),
                        user_text="q")
    assert json.loads(ADAPTER.build_request(call).body)["include"] == [
        "reasoning.encrypted_content"]
