"""Provider compaction in the codecs: what Anthropic requests ask for, and every replay or
local loop starting at the latest compaction point of the same provider and model."""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic.types.beta import (
    BetaCompactionBlockParam,
    BetaContextManagementConfigParam,
)
from openai.types.responses import ResponseCompactionItemParamParam
from pydantic import BaseModel, TypeAdapter

from tests.providers.support import message, request_json
from turnstate.core._compaction import context_chars, latest_compaction
from turnstate.core._context import ContextSettings, part_chars
from turnstate.core._conversation import (
    Message,
    OpaquePart,
    Part,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from turnstate.core._decisions import Strategy
from turnstate.core._json import compact_json
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo
from turnstate.providers._protocol import ProviderCall
from turnstate.providers.anthropic import AnthropicAdapter
from turnstate.providers.openai_responses import OpenAIResponsesAdapter

SONNET_46 = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-6")
SONNET_45 = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")
GPT5 = DEFAULT_REGISTRY.model("openai", "gpt-5-mini")
ANTHROPIC = AnthropicAdapter(api_key="k")
OPENAI = OpenAIResponsesAdapter(api_key="k")
SUMMARY = "Summary: Lyon trip, museums first."
BLOCK = {"type": "compaction", "content": SUMMARY, "encrypted_content": None}
ITEM = {"id": "cmp_01", "type": "compaction", "encrypted_content": "gAAAA-cmp=="}


def anthropic_compaction(model: str = "claude-sonnet-4-6-20260101", **block: Any) -> OpaquePart:
    return OpaquePart(provider="anthropic", model=model, kind="compaction",
                      raw=compact_json({**BLOCK, **block}))


def openai_compaction(model: str = "gpt-5-mini-2025-08-07") -> OpaquePart:
    return OpaquePart(provider="openai", model=model, kind="compaction", raw=compact_json(ITEM))


def chat(compaction: Part | None) -> tuple[Message, ...]:
    """Three turns; the second answer carries ``compaction`` before its text."""
    second: tuple[Part, ...] = (compaction, TextPart(text="a2")) if compaction else (
        TextPart(text="a2"),)
    return (message(1, Role.USER, TextPart(text="u1")),
            message(2, Role.ASSISTANT, TextPart(text="a1")),
            message(3, Role.USER, TextPart(text="u2")),
            message(4, Role.ASSISTANT, *second),
            message(5, Role.USER, TextPart(text="u3")),
            message(6, Role.ASSISTANT, ToolCallPart(call_id="t1", name="clock", arguments="{}"),
                    ToolResultPart(call_id="t1", name="clock", output="noon"),
                    TextPart(text="a3")))


def call(model: ModelInfo, history: tuple[Message, ...] = (), **changes: Any) -> ProviderCall:
    fields: dict[str, Any] = {"strategy": Strategy.LOCAL_LOOP, "model": model,
                              "system_prompt": "Be brief.", "tools": (), "history": history,
                              "user_text": "next"}
    return ProviderCall(**{**fields, **changes})


# --- what an Anthropic request asks for ----------------------------------------------


def test_anthropic_asks_to_compact_where_the_registry_flags_the_model() -> None:
    request = ANTHROPIC.build_request(call(SONNET_46))
    body = json.loads(request.body)
    assert request.headers["anthropic-beta"] == "compact-2026-01-12"
    assert body["context_management"] == {"edits": [{
        "type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 160_000}}]}
    # The SDK's beta types accept it as it is.
    TypeAdapter(BetaContextManagementConfigParam).validate_python(body["context_management"])


@pytest.mark.parametrize(("model", "settings"), [
    (SONNET_45, ContextSettings()),  # the model does not support it
    (SONNET_46, ContextSettings(provider_compaction_enabled=False)),  # off per request
])
def test_anthropic_does_not_ask_otherwise(model: ModelInfo, settings: ContextSettings) -> None:
    request = ANTHROPIC.build_request(call(model, settings=settings))
    assert "anthropic-beta" not in request.headers
    assert "context_management" not in json.loads(request.body)


@pytest.mark.parametrize(("threshold", "sent"), [(None, 50_000), (60_000, 60_000),
                                                 (10_000, 50_000)])
def test_the_trigger_is_never_below_the_api_minimum(threshold: int | None, sent: int) -> None:
    small = ModelInfo(provider="anthropic", name="small", context_limit=40_000, compaction=True)
    body = request_json(ANTHROPIC, call(small, settings=ContextSettings(
        compact_threshold=threshold)))
    assert body["context_management"]["edits"][0]["trigger"]["value"] == sent


# --- Anthropic: replay from the latest compaction block --------------------------------


def test_anthropic_replays_from_the_compaction_block() -> None:
    body = request_json(ANTHROPIC, call(SONNET_46, chat(anthropic_compaction())))
    sent_block = {"type": "compaction", "content": SUMMARY}  # a null key is left out
    TypeAdapter(BetaCompactionBlockParam).validate_python(sent_block)
    assert body["messages"] == [
        {"role": "assistant", "content": [sent_block, {"type": "text", "text": "a2"}]},
        {"role": "user", "content": [{"type": "text", "text": "u3"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "clock", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "noon", "is_error": False}]},
        {"role": "assistant", "content": [{"type": "text", "text": "a3"}]},
        {"role": "user", "content": [{"type": "text", "text": "next"}]}]


def _full_history_texts(body: dict[str, Any]) -> list[str]:
    return [block.get("text", block["type"]) for m in body["messages"] for block in m["content"]]


FULL = ["u1", "a1", "u2", "a2", "u3", "tool_use", "tool_result", "a3", "next"]


@pytest.mark.parametrize("compaction", [
    anthropic_compaction(model="claude-opus-4-6"),  # another model's
    openai_compaction(),  # another provider's
    anthropic_compaction(content=None),  # a failed compaction (no summary)
    anthropic_compaction(content=""),
], ids=["other-model", "other-provider", "null-content", "empty-content"])
def test_anthropic_replays_everything_past_a_compaction_it_may_not_use(
    compaction: OpaquePart,
) -> None:
    body = request_json(ANTHROPIC, call(SONNET_46, chat(compaction)))
    assert _full_history_texts(body) == FULL


def test_anthropic_loop_starts_at_a_compaction_made_in_this_turn() -> None:
    """A compaction in the loop (this turn's first answer) cuts history, user text and
    earlier loop messages; the API would drop them anyway."""
    loop = ({"role": "assistant", "content": [
                {"type": "text", "text": "before"},
                {"type": "compaction", "content": "turn summary"},
                {"type": "tool_use", "id": "t9", "name": "clock", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9",
                                          "content": "noon", "is_error": False}]})
    body = request_json(ANTHROPIC, call(SONNET_46, chat(anthropic_compaction()),
                                        loop_messages=loop, iteration=1))
    assert body["messages"] == [
        {"role": "assistant", "content": [
            {"type": "compaction", "content": "turn summary"},
            {"type": "tool_use", "id": "t9", "name": "clock", "input": {}}]},
        loop[1]]


# --- OpenAI: a stateless chain from the latest compaction item -------------------------


def test_openai_replay_starts_at_the_compaction_item() -> None:
    body = request_json(OPENAI, call(GPT5, chat(openai_compaction()),
                                     strategy=Strategy.REPLAY))
    TypeAdapter(ResponseCompactionItemParamParam).validate_python(body["input"][0])
    assert body["input"] == [
        {"type": "compaction", "encrypted_content": "gAAAA-cmp=="},
        {"type": "message", "role": "assistant", "content": "a2"},
        {"type": "message", "role": "user", "content": "u3"},
        {"type": "function_call", "call_id": "t1", "name": "clock", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "t1", "output": "noon"},
        {"type": "message", "role": "assistant", "content": "a3"},
        {"type": "message", "role": "user", "content": "next"}]


@pytest.mark.parametrize("compaction", [openai_compaction(model="gpt-4.1"),
                                        anthropic_compaction()],
                         ids=["other-model", "other-provider"])
def test_openai_replays_everything_past_a_compaction_it_may_not_use(
    compaction: OpaquePart,
) -> None:
    body = request_json(OPENAI, call(GPT5, chat(compaction), strategy=Strategy.REPLAY))
    assert [item.get("type") for item in body["input"]].count("compaction") == 0
    assert len(body["input"]) == 9


def test_the_cursor_path_never_prunes() -> None:
    """With ``previous_response_id`` the provider keeps the chain: only the new input."""
    body = request_json(OPENAI, call(GPT5, strategy=Strategy.CURSOR, cursor="resp_1"))
    assert body["input"] == [{"type": "message", "role": "user", "content": "next"}]


# --- the context estimate counts from the compaction point -----------------------------


def test_the_estimate_counts_from_the_history_compaction() -> None:
    history = chat(anthropic_compaction())
    chars, parts, user = context_chars((), history=history, history_chars=10_000,
                                       provider="anthropic", model="claude-sonnet-4-6")
    after = sum(part_chars(m.parts) for m in history[4:])
    assert chars == len(SUMMARY) + len("a2") + after
    assert (parts, user) == ((), True)
    # Another provider's compaction, or none loaded: the stored count.
    assert context_chars((), history=history, history_chars=10_000, provider="openai",
                         model="gpt-5-mini")[0] == 10_000
    assert context_chars((), history=None, history_chars=10_000, provider="anthropic",
                         model="claude-sonnet-4-6")[0] == 10_000


def test_the_estimate_counts_from_this_turns_compaction() -> None:
    turn = (anthropic_compaction(), TextPart(text="answer"))
    chars, parts, user = context_chars(turn, history=chat(None), history_chars=10_000,
                                       provider="anthropic", model="claude-sonnet-4-6")
    assert (chars, parts, user) == (len(SUMMARY), (TextPart(text="answer"),), False)


def test_the_latest_compaction_wins() -> None:
    history = (*chat(anthropic_compaction()), message(7, Role.USER, TextPart(text="u4")),
               message(8, Role.ASSISTANT, anthropic_compaction(content="later"),
                       TextPart(text="a4")))
    point = latest_compaction(history, "anthropic", "claude-sonnet-4-6")
    assert point is not None and (point.message, point.part) == (7, 0)


# --- the bodies are what the official SDKs' types accept ------------------------------


def plain(value: Any) -> Any:
    """A validated TypedDict value as plain JSON data (pydantic hands back ``Iterable``
    fields as lazy validator iterators)."""
    if isinstance(value, BaseModel):  # a block the union matched as a model
        return plain(value.model_dump(exclude_unset=True))
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return [plain(item) for item in value]


def test_a_compacting_anthropic_body_is_a_beta_message_create_params() -> None:
    """Context management and the compaction block are beta params: the whole body, with
    unknown keys dropped by the SDK's TypedDicts, comes back unchanged."""
    from anthropic.types.beta.message_create_params import MessageCreateParamsStreaming

    body = request_json(ANTHROPIC, call(SONNET_46, chat(anthropic_compaction())))
    assert body["messages"][0]["content"][0]["type"] == "compaction"
    assert plain(TypeAdapter(MessageCreateParamsStreaming).validate_python(body)) == body


def test_an_openai_replay_from_a_compaction_item_is_a_response_create_params() -> None:
    from openai.types.responses.response_create_params import ResponseCreateParamsStreaming

    body = request_json(OPENAI, call(GPT5, chat(openai_compaction()),
                                     strategy=Strategy.REPLAY))
    assert plain(TypeAdapter(ResponseCreateParamsStreaming).validate_python(body)) == body
