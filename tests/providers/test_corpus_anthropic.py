"""The Anthropic Messages corpus: each stream's parts, finish, usage and loop replay."""

from __future__ import annotations

from typing import Any

import attrs
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


COMPACTING = attrs.evolve(CALL, model=DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-6"))


def replay(response: ProviderResponse) -> tuple[Any, ...]:
    """The messages the next request of the tool loop sends for this response."""
    return ADAPTER.extend_loop(CALL, response, results_for(response))


def replay_compacting(response: ProviderResponse) -> tuple[Any, ...]:
    """``replay`` on a model that compacts (the compaction corpus is claude-sonnet-4-6's)."""
    return ADAPTER.extend_loop(COMPACTING, response, results_for(response))


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def results(*call_ids: str) -> dict[str, Any]:
    return {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call_id, "content": "ok:weather",
         "is_error": False} for call_id in call_ids]}


SIGNATURE = "EqQBCkYIBxgCKkBsig=="
REDACTED = "EmwKAhgBEgy3redacted=="
SERVER_TOOL_USE = {"type": "server_tool_use", "id": "srvtoolu_01S", "name": "web_search",
                   "input": {"query": "lyon weather"}}
SEARCH_RESULT = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01S", "content": [
    {"type": "web_search_result", "title": "Lyon forecast", "url": "https://weather.example/lyon",
     "encrypted_content": "EqgfCiQ=", "page_age": None}]}

COMPACTION = {"type": "compaction",
              "content": "Summary: the user is planning a week in Lyon in May; they asked "
                         "about museums and the weather.",
              "encrypted_content": "EqQBCkYIBxgCKkCmpEnc=="}
COMPACTED_ANSWER = "Based on what we planned, visit the Musée des Confluences first."
LYON_SUMMARY = {"type": "compaction",
                "content": "Summary: weather lookups for Oslo and Lyon were done; Lyon is next."}

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
    "text-and-parallel-tool-use": Case(
        parts=(("text", "I'll check both cities."),
               ("call", "toolu_01A", "weather", '{"city": "Paris"}'),
               ("call", "toolu_01B", "weather", '{"city": "Oslo"}'), ("text", "One moment.")),
        finish="tool_calls", usage=usage(400, 88),
        # One segment, its blocks in the order streamed: the text after the calls stays
        # after them (it was once joined to the first text, ahead of the calls).
        replay=({"role": "assistant", "content": [
                    text("I'll check both cities."),
                    tool_use("toolu_01A", "weather", {"city": "Paris"}),
                    tool_use("toolu_01B", "weather", {"city": "Oslo"}),
                    text("One moment.")]},
                results("toolu_01A", "toolu_01B"))),
    "tool-without-arguments": Case(
        parts=(("call", "toolu_01T", "get_time", "{}"),), finish="tool_calls",
        usage=usage(120, 12),
        replay=({"role": "assistant", "content": [tool_use("toolu_01T", "get_time", {})]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01T",
                                              "content": "ok:get_time", "is_error": False}]})),
    "thinking-redacted-signature": Case(
        parts=(("reasoning", "thinking", "The user wants Paris weather.", SIGNATURE, None),
               ("reasoning", "redacted_thinking", "", None, REDACTED),
               ("call", "toolu_01W", "weather", '{"city":"Paris"}')),
        finish="tool_calls", usage=usage(600, 95, reasoning=40),
        replay=({"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "The user wants Paris weather.",
                     "signature": SIGNATURE},
                    {"type": "redacted_thinking", "data": REDACTED},
                    tool_use("toolu_01W", "weather", {"city": "Paris"})]},
                results("toolu_01W"))),
    "server-tool-web-search": Case(
        parts=(("opaque", "server_tool_use", SERVER_TOOL_USE),
               ("opaque", "web_search_tool_result", SEARCH_RESULT),
               ("text", "Lyon is sunny, 24C.")),
        finish="stop", usage=usage(900, 60),
        replay=({"role": "assistant", "content": [SERVER_TOOL_USE, SEARCH_RESULT,
                                                  text("Lyon is sunny, 24C.")]},)),
    "compaction-then-text": Case(
        response_id="msg_01Cmp",
        parts=(("opaque", "compaction", COMPACTION), ("text", COMPACTED_ANSWER)),
        finish="stop", usage=usage(2300, 40),
        replay=({"role": "assistant", "content": [COMPACTION, text(COMPACTED_ANSWER)]},)),
    "compaction-null-encrypted-then-tool": Case(
        parts=(("opaque", "compaction", {**LYON_SUMMARY, "encrypted_content": None}),
               ("call", "toolu_01CmpW", "weather", '{"city": "Lyon"}')),
        finish="tool_calls", usage=usage(1800, 30),
        # A null ``encrypted_content`` is not sent back (the API refuses it).
        replay=({"role": "assistant", "content": [
                    LYON_SUMMARY, tool_use("toolu_01CmpW", "weather", {"city": "Lyon"})]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01CmpW",
                     "content": "ok:weather", "is_error": False}]})),
    "compaction-failed": Case(
        parts=(("opaque", "compaction",
                {"type": "compaction", "content": None, "encrypted_content": None}),
               ("text", "Sure.")),
        finish="stop", usage=usage(151000, 3),
        # A compaction without its summary is a no-op for the API: never sent back.
        replay=({"role": "assistant", "content": [text("Sure.")]},)),
    "max-tokens": Case(parts=(("text", "The list begins: one, two,"),), finish="length",
                       usage=usage(30, 16),
                       replay=({"role": "assistant",
                                "content": [text("The list begins: one, two,")]},)),
    "refusal-unknown-events": Case(
        parts=(("text", "I can't help with that."),), finish="refusal", usage=usage(25, 9),
        replay=({"role": "assistant", "content": [text("I can't help with that.")]},)),
}


def test_every_corpus_stream_has_a_case() -> None:
    assert case_names(PROTOCOL) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_stream(name: str) -> None:
    render = replay_compacting if name.startswith("compaction") else replay
    check(AnthropicStreamParser(), events(PROTOCOL, name), CASES[name], render)


def test_server_tool_blocks_go_back_only_to_the_model_that_made_them() -> None:
    """Opaque blocks go back in this model's tool loop only, like thinking blocks."""
    response = check(AnthropicStreamParser(), events(PROTOCOL, "server-tool-web-search"),
                     CASES["server-tool-web-search"])
    assert response is not None
    other = ProviderCall(strategy=Strategy.LOCAL_LOOP, tools=(), system_prompt="",
                         model=DEFAULT_REGISTRY.model("anthropic", "claude-opus-4-1"))
    assert ADAPTER.extend_loop(other, response, ()) == (
        {"role": "assistant", "content": [text("Lyon is sunny, 24C.")]},)
