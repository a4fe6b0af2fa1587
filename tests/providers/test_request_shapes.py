"""Every request body the five codecs build validates against the official SDKs' param
types (issue 24): ``openai`` ``ResponseCreateParams`` and ``CompletionCreateParams``,
``anthropic`` ``MessageCreateParams`` (the beta params for a body that names a beta)
and google-genai's Interactions create params, through pydantic's ``TypeAdapter``, with
unknown keys forbidden (``tests/providers/sdk_params.py``; provider dialect fields the
SDK types do not know are listed in its ``DIALECT``, each with its docs reference;
anything else is a failure).

``CASES`` is a list of conversations: add one (images, cache_control, compaction blocks)
and every codec's body for it is validated too. Generation settings (every field each
codec carries, each ``tool_choice``), Anthropic's cache breakpoints and its compaction
beta have their own tests below.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest

from tests.providers.sdk_params import (
    BetaMessageCreateParams,
    MessageCreateParamsStreaming,
    params_for,
    unknown_fields,
)
from tests.providers.support import message
from turnstate.core._capabilities import PROVIDER_SETTINGS
from turnstate.core._context import ContextSettings
from turnstate.core._conversation import (
    Message,
    OpaquePart,
    Part,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from turnstate.core._cost import CachePolicy
from turnstate.core._decisions import Strategy
from turnstate.core._generation import GenerationSettings, check_settings
from turnstate.core._json import compact_json
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo
from turnstate.providers._protocol import (
    ProviderAdapter,
    ProviderCall,
    ProviderResponse,
)
from turnstate.providers.anthropic import AnthropicAdapter
from turnstate.providers.chat_completions import ChatCompletionsAdapter
from turnstate.providers.deepseek import DeepSeekAdapter
from turnstate.providers.gemini_interactions import GeminiInteractionsAdapter
from turnstate.providers.openai_responses import OpenAIResponsesAdapter

MODELS = {"openai": "gpt-5-mini", "gemini": "gemini-2.5-flash", "anthropic": "claude-sonnet-4-5",
          "deepseek": "deepseek-v4-flash", "openai-compatible": "gpt-4o-mini"}
ADAPTERS: dict[str, Callable[[], ProviderAdapter]] = {
    "openai": lambda: OpenAIResponsesAdapter(api_key="k", include_encrypted_reasoning=True),
    "gemini": lambda: GeminiInteractionsAdapter(api_key="k"),
    "anthropic": lambda: AnthropicAdapter(api_key="k"),
    "deepseek": lambda: DeepSeekAdapter(api_key="k"),
    "openai-compatible": lambda: ChatCompletionsAdapter(api_key="k"),
}
WEATHER = ToolSpec(name="weather", description="Weather for a city.", parameters={
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})

OPAQUE: dict[str, tuple[dict[str, Any], ...]] = {
    "openai": ({"type": "web_search_call", "id": "ws_1", "status": "completed",
                "action": {"type": "search", "query": "weather Oslo"}},),
    "anthropic": ({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
                   "input": {"query": "weather Oslo"}},
                  {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
                      {"type": "web_search_result", "url": "https://example.com/oslo",
                       "title": "Oslo", "encrypted_content": "enc", "page_age": None}]}),
    "gemini": ({"id": "gs_1", "type": "google_search_call",
                "arguments": {"queries": ["weather Oslo"]}, "signature": "c2lnLWNhbGw="},
               {"type": "google_search_result", "call_id": "gs_1", "is_error": False,
                "result": [{"search_suggestions": "<div/>"}], "signature": "c2lnLXJlc3VsdA=="}),
}


def reasoning(provider: str, model: str) -> tuple[Part, ...]:
    """The reasoning artefacts a provider's answer carries, as the parsers keep them."""
    if provider == "openai":
        return (ReasoningPart(provider=provider, model=model, kind="reasoning",
                              text="Need the weather.", data="gAAAA-enc", signature="rs_1"),)
    if provider == "anthropic":
        return (ReasoningPart(provider=provider, model=model, kind="thinking",
                              text="Need the weather.", signature="EqQBsig"),
                ReasoningPart(provider=provider, model=model, kind="redacted_thinking",
                              data="EmwKAhgB"))
    if provider == "gemini":
        return (ReasoningPart(provider=provider, model=model, kind="thought",
                              text="Need the weather.", signature="dGhvdWdodA=="),)
    kind = "reasoning_content" if provider == "deepseek" else "reasoning"
    return (ReasoningPart(provider=provider, model=model, kind=kind, text="Need the weather."),)


def tool_round(provider: str, model: str, n: int) -> tuple[Part, ...]:
    signature = "Y2FsbA==" if provider == "gemini" else None
    call_id = f"toolu_{n}" if provider == "anthropic" else f"call_{n}"
    return (*reasoning(provider, model),
            ToolCallPart(call_id=call_id, name="weather", arguments='{"city":"Oslo"}',
                         provider=provider, model=model, signature=signature),
            ToolResultPart(call_id=call_id, name="weather", output="cold"))


def opaque(provider: str, model: str) -> tuple[Part, ...]:
    return tuple(OpaquePart(provider=provider, model=model, kind=block["type"],
                            raw=compact_json(block)) for block in OPAQUE.get(provider, ()))


@attrs.frozen
class Conversation:
    """One case: the call's history and fields, built per provider and model."""

    name: str
    history: Callable[[str, str], tuple[Message, ...]] = lambda p, m: ()
    fields: Callable[[str, str], dict[str, Any]] = lambda p, m: {}
    loop: bool = False
    """Also validate the request after one tool iteration (``extend_loop`` / cursor)."""


def _tool_history(provider: str, model: str) -> tuple[Message, ...]:
    return (message(1, Role.USER, TextPart(text="Weather in Oslo?")),
            message(2, Role.ASSISTANT, *tool_round(provider, model, 1),
                    TextPart(text="Cold in Oslo.")),
            message(3, Role.USER, TextPart(text="And tomorrow?")),
            message(4, Role.ASSISTANT, TextPart(text="Colder.")))


def _opaque_history(provider: str, model: str) -> tuple[Message, ...]:
    return (message(1, Role.USER, TextPart(text="Search the weather.")),
            message(2, Role.ASSISTANT, *reasoning(provider, model), *opaque(provider, model),
                    TextPart(text="Cold, 2°C.")))


def _recovery(provider: str, model: str) -> dict[str, Any]:
    return {"turn_parts": tool_round(provider, model, 9)}


def _long_history(provider: str, model: str) -> tuple[Message, ...]:
    """Enough text for every provider's prompt-cache minimum, a compaction part where
    the provider makes them, and a tool round after it."""
    words = " ".join(f"word{i}" for i in range(3000))
    compaction = {"openai": {"type": "compaction", "id": "cmp_1",
                             "encrypted_content": "gAAAA-compacted"},
                  "anthropic": {"type": "compaction", "content": "Summary of the chat."}}
    block = compaction.get(provider)
    marks = () if block is None else (OpaquePart(provider=provider, model=model,
                                                 kind="compaction", raw=compact_json(block)),)
    return (message(1, Role.USER, TextPart(text=words)),
            message(2, Role.ASSISTANT, *marks, TextPart(text="Noted.")),
            message(3, Role.USER, TextPart(text="Weather in Oslo?")),
            message(4, Role.ASSISTANT, *tool_round(provider, model, 2), TextPart(text="Cold.")))


def _cached_compacting(provider: str, model: str) -> dict[str, Any]:
    return {"cache_key": "ck_5f2a9c", "settings": ContextSettings(compact_threshold=50_000)}


CASES = [
    Conversation("first-message"),
    Conversation("tools-and-reasoning-history", history=_tool_history, loop=True),
    Conversation("opaque-server-items", history=_opaque_history),
    Conversation("recovered-tool-results", history=_tool_history, fields=_recovery),
    Conversation("cached-compacted-long-history", history=_long_history,
                 fields=_cached_compacting, loop=True),
]


def calls(provider: str, case: Conversation,
          model: ModelInfo | None = None) -> Iterator[tuple[str, ProviderCall]]:
    """The case's calls (to ``model``, else ``MODELS[provider]``): replay (every
    provider), for durable ones a cursor call, and the loop's next request."""
    model = model or DEFAULT_REGISTRY.model(provider, MODELS[provider])
    durable = provider in ("openai", "gemini")
    fields: dict[str, Any] = {"system_prompt": "Be brief.", "tools": (WEATHER,),
                              "history": case.history(provider, model.name),
                              "user_text": "Go on.", **case.fields(provider, model.name)}
    base = ProviderCall(strategy=Strategy.REPLAY if durable else Strategy.LOCAL_LOOP,
                        model=model, **fields)
    yield "replay", base
    if durable:
        yield "cursor", attrs.evolve(base, strategy=Strategy.CURSOR, cursor="resp_prev",
                                     history=(), turn_parts=())
    if case.loop:
        yield "loop", _after_one_iteration(provider, base)


def _after_one_iteration(provider: str, call: ProviderCall) -> ProviderCall:
    round_parts = tool_round(provider, call.model.name, 5)
    response = ProviderResponse(response_id="resp_1", parts=round_parts[:-1])
    results = (round_parts[-1],)
    if provider in ("openai", "gemini"):
        return attrs.evolve(call, strategy=Strategy.CURSOR, cursor="resp_1", history=(),
                            tool_results=results, iteration=1)
    loop = ADAPTERS[provider]().extend_loop(call, response, results)  # type: ignore[arg-type]
    return attrs.evolve(call, loop_messages=loop, iteration=1)


@pytest.mark.parametrize("provider", list(ADAPTERS))
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_body_validates_against_the_sdk_types(provider: str, case: Conversation) -> None:
    """Every body the codec builds for the case passes the official SDK's create params
    with unknown keys forbidden (dialect fields listed in ``DIALECT``)."""
    adapter = ADAPTERS[provider]()
    for label, call in calls(provider, case):
        request = adapter.build_request(call)
        body = json.loads(request.body)
        assert unknown_fields(provider, body, params_for(provider, request)) == [], (label, body)


def test_the_check_catches_an_unknown_key() -> None:
    """The walker is not vacuous: an unknown key, nested in a message, is reported, and a
    listed dialect field is only allowed for its provider."""
    body = {"model": "m", "stream": True, "messages": [
        {"role": "user", "content": "hi", "mood": "calm"},
        {"role": "assistant", "content": "ok", "reasoning_content": "r"}]}
    assert unknown_fields("openai-compatible", body) == ["messages[].mood",
                                                         "messages[].reasoning_content"]
    assert unknown_fields("deepseek", body) == ["messages[].mood"]
    with pytest.raises(ValueError):
        unknown_fields("anthropic", {"model": "m", "max_tokens": 1, "stream": True,
                                     "messages": [{"role": "tool", "content": "x"}]})


# --- generation settings, prompt caching, compaction ----------------------------------------

TOOL_CHOICES = ("auto", "none", "required", "weather")
SETTINGS_MODELS = {"openai": ("gpt-4o", "gpt-5-mini"),
                   "gemini": ("gemini-2.5-flash", "gemini-3-pro-preview"),
                   "anthropic": ("claude-sonnet-4-5", "claude-sonnet-4-6"),
                   "deepseek": ("deepseek-chat", "deepseek-v4-flash"),
                   "openai-compatible": ("gpt-4o-mini", "grok-3-mini")}
"""Per provider: a sampling model, and one that reasons (an effort, or a thinking budget)."""


METADATA = {"anthropic": {"user_id": "u-1"}}
"""Anthropic's metadata takes ``user_id`` alone."""


def generation(provider: str, model: ModelInfo, choice: str, *,
               reasoning: bool) -> GenerationSettings:
    """Every setting the provider's adapter carries (``PROVIDER_SETTINGS``) that the model
    takes, checked by ``check_settings`` as a turn's settings are."""
    values: dict[str, Any] = {"max_output_tokens": 4096, "tool_choice": choice,
                              "stop": ("END",), "parallel_tool_calls": False,
                              "metadata": METADATA.get(provider, {"chat": "c-1"}), "seed": 7}
    if model.sampling:  # Claude 4.x takes one of the two per request
        values |= {"temperature": 0.5} if model.one_sampler else {"temperature": 0.5,
                                                                  "top_p": 0.9}
    if reasoning and model.reasoning_efforts:
        values["reasoning_effort"] = "low"
    if reasoning and model.min_thinking_budget:  # Anthropic's thinking rules
        values.pop("temperature", None)
        values |= {"reasoning_budget_tokens": 2048, "top_p": 0.95}
    settings = GenerationSettings(**{k: v for k, v in values.items()
                                     if k in PROVIDER_SETTINGS[provider]})
    check_settings(settings, DEFAULT_REGISTRY.provider(provider), model, ("weather",))
    return settings


SETTINGS_CASES = [(provider, reasoning, choice) for provider in ADAPTERS
                  for reasoning in (False, True) for choice in TOOL_CHOICES
                  if not (provider == "anthropic" and reasoning and choice in ("required",
                                                                                 "weather"))]


@pytest.mark.parametrize(("provider", "reasoning", "choice"), SETTINGS_CASES)
def test_bodies_with_generation_settings_validate(provider: str, reasoning: bool,
                                                  choice: str) -> None:
    """A tool history's replay, cursor and loop bodies with every setting the provider
    carries (Anthropic's thinking takes ``auto`` / ``none`` only: issue 23)."""
    model = DEFAULT_REGISTRY.model(provider, SETTINGS_MODELS[provider][reasoning])
    settings = generation(provider, model, choice, reasoning=reasoning)
    case = Conversation("settings", history=_tool_history, loop=True,
                        fields=lambda p, m: {"generation": settings})
    adapter = ADAPTERS[provider]()
    for label, call in calls(provider, case, model):
        request = adapter.build_request(call)
        body = json.loads(request.body)
        plain = json.loads(adapter.build_request(
            attrs.evolve(call, generation=GenerationSettings())).body)
        assert body != plain, (label, "the settings reached the body")
        assert unknown_fields(provider, body, params_for(provider, request)) == [], (label, body)


@pytest.mark.parametrize("cache", [CachePolicy.AUTO, CachePolicy.TTL_5M, CachePolicy.TTL_1H])
def test_anthropic_cache_breakpoints_validate(cache: CachePolicy) -> None:
    """The breakpoints the codec places (tools and system, the history's last block, the
    loop's newest results) are ``cache_control`` params the SDK knows, five-minute or
    one-hour."""
    case = Conversation("cache", history=_tool_history, loop=True, fields=lambda p, m: {
        "cache": cache, "system_prompt": "Be brief. " * 800})
    adapter = ADAPTERS["anthropic"]()
    for label, call in calls("anthropic", case):
        request = adapter.build_request(call)
        body = json.loads(request.body)
        marks = json.dumps(body).count('"cache_control"')
        assert 1 <= marks <= 4, (label, marks)
        assert ('"ttl": "1h"' in json.dumps(body)) is (cache is CachePolicy.TTL_1H)
        assert unknown_fields("anthropic", body) == [], (label, body)


def _compacted(provider: str, model: str) -> tuple[Message, ...]:
    block = OpaquePart(provider=provider, model=model, kind="compaction",
                       raw=compact_json({"type": "compaction", "content": "Summary."}))
    return (message(1, Role.USER, TextPart(text="Long story.")),
            message(2, Role.ASSISTANT, block, TextPart(text="Noted.")))


@pytest.mark.parametrize(("enabled", "history", "beta"), [
    (True, (), True), (False, (), False), (False, _compacted, True), (True, _compacted, True)])
def test_anthropic_beta_params_exactly_where_the_body_needs_them(
    enabled: bool, history: Any, beta: bool,
) -> None:
    """claude-sonnet-4-6: a body asking for compaction (``context_management``) or
    carrying a compaction block back validates against the SDK's beta params, names the
    beta, and the plain params refuse it; any other body validates against the plain
    params and names no beta."""
    model = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-6")
    call = ProviderCall(strategy=Strategy.LOCAL_LOOP, model=model, system_prompt="Be brief.",
                        tools=(WEATHER,), user_text="Go on.",
                        settings=ContextSettings(provider_compaction_enabled=enabled),
                        history=history("anthropic", model.name) if history else ())
    request = ADAPTERS["anthropic"]().build_request(call)
    body = json.loads(request.body)
    assert ("context_management" in body) is enabled
    assert bool(request.headers.get("anthropic-beta")) is beta
    assert params_for("anthropic", request) is (BetaMessageCreateParams if beta
                                                else MessageCreateParamsStreaming)
    assert unknown_fields("anthropic", body, params_for("anthropic", request)) == []
    if beta:
        assert _refused_by_plain_params(body)


def _refused_by_plain_params(body: dict[str, Any]) -> list[str]:
    """What the GA params cannot take: unknown keys, or a block no GA type matches."""
    try:
        return unknown_fields("anthropic", body, MessageCreateParamsStreaming)
    except ValueError as exc:  # pydantic's ValidationError: a compaction block
        return [str(exc).splitlines()[0]]
