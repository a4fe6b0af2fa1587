"""Stored chats holding repeated or empty tool call ids (written before attack3's fix, or
by a server minting ``call_0`` every turn) replay to Anthropic and Chat Completions with
distinct ids, each result still paired with its call, the same in every request (wire4).

Anthropic refuses such a request: "messages.3.content.0: `tool_use` ids must be unique"
(400 ``invalid_request_error``); OpenAI refuses an empty ``tool_calls[].id``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.providers.support import message, request_json
from turnstate.core._conversation import Role, TextPart, ToolCallPart, ToolResultPart
from turnstate.core._decisions import Strategy
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers import AnthropicAdapter, ChatCompletionsAdapter, ProviderCall


def call_part(call_id: str, city: str) -> ToolCallPart:
    return ToolCallPart(call_id=call_id, name="weather", arguments=f'{{"city":"{city}"}}')


def result(call_id: str, city: str) -> ToolResultPart:
    return ToolResultPart(call_id=call_id, name="weather", output=f"sunny in {city}")


HISTORY = (
    message(1, Role.USER, TextPart(text="one")),
    message(2, Role.ASSISTANT, call_part("call_0", "Oslo"), result("call_0", "Oslo"),
            TextPart(text="ok")),
    message(3, Role.USER, TextPart(text="two")),
    # the same id again in a later turn, twice in one answer, then two empty ids
    message(4, Role.ASSISTANT, call_part("call_0", "Rome"), call_part("call_0", "Bern"),
            result("call_0", "Rome"), result("call_0", "Bern"),
            call_part("", "Lima"), call_part("", "Kyiv"), result("", "Lima"),
            result("", "Kyiv"), TextPart(text="done")),
)
PROVIDERS = {"anthropic": (AnthropicAdapter(), "claude-sonnet-4-5"),
             "openai-compatible": (ChatCompletionsAdapter(), "gpt-4o")}


def body(provider: str, history: tuple[Any, ...] = HISTORY) -> Any:
    adapter, model = PROVIDERS[provider]
    return request_json(adapter, ProviderCall(
        strategy=Strategy.LOCAL_LOOP, model=DEFAULT_REGISTRY.model(provider, model),
        system_prompt="", tools=(), user_text="three", history=history))


def pairs(provider: str, sent: Any) -> list[tuple[str, str]]:
    """(call id, the city of the result answering it) in request order."""
    calls: dict[str, str] = {}
    out: list[tuple[str, str]] = []
    for m in sent["messages"]:
        content = m.get("content")
        if provider == "anthropic" and isinstance(content, list):
            for block in content:
                if block["type"] == "tool_use":
                    assert block["id"] not in calls
                    calls[block["id"]] = block["input"]["city"]
                elif block["type"] == "tool_result":
                    out.append((block["tool_use_id"], block["content"]))
        for c in m.get("tool_calls") or ():
            assert c["id"] not in calls
            calls[c["id"]] = c["function"]["arguments"]
        if m["role"] == "tool":
            out.append((m["tool_call_id"], m["content"]))
    assert all(call_id for call_id in calls)
    assert [output for _, output in out] == [f"sunny in {c}" for c in
                                              ("Oslo", "Rome", "Bern", "Lima", "Kyiv")]
    for call_id, output in out:  # each result answers the call it answered when stored
        assert output.endswith(calls[call_id].split('"')[-2] if provider != "anthropic"
                               else calls[call_id])
    return [(call_id, output) for call_id, output in out]


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_repeated_and_empty_stored_ids_go_out_distinct_and_paired(provider: str) -> None:
    sent = body(provider)
    ids = [call_id for call_id, _ in pairs(provider, sent)]
    assert len(set(ids)) == 5 and ids[0] == "call_0"


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_the_renamed_ids_are_the_same_in_every_request(provider: str) -> None:
    longer = (*HISTORY, message(5, Role.USER, TextPart(text="three")),
              message(6, Role.ASSISTANT, call_part("call_0", "Pisa"), result("call_0", "Pisa"),
                      TextPart(text="ok")))
    first = pairs(provider, body(provider))
    assert pairs(provider, body(provider)) == first
    before = body(provider)["messages"][:-1]  # the history, without the question
    assert body(provider, longer)["messages"][:len(before)] == before


def test_a_history_without_repeats_is_replayed_as_it_is() -> None:
    from turnstate.providers._tool_calls import distinct_history_ids
    plain = (message(2, Role.ASSISTANT, call_part("a", "x"), result("a", "x")),
             message(4, Role.ASSISTANT, call_part("b", "y"), result("b", "y")))
    assert distinct_history_ids(plain) is plain
