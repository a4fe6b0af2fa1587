"""Every request body the five codecs build validates against the official SDKs' param
types (issue 24): ``openai`` ``ResponseCreateParams`` and ``CompletionCreateParams``,
``anthropic`` ``MessageCreateParams`` and google-genai's Interactions create params,
through pydantic's ``TypeAdapter``, with unknown keys forbidden.

A TypedDict validates with unknown keys dropped, so a body is validated, its lazy
iterables drained (which validates their items), and the result compared with the body:
any key the types dropped is a key they do not know. Provider dialect fields the SDK
types do not know are listed in ``DIALECT``, each with its docs reference; anything
else is a failure.

``CASES`` is a list of conversations: add one (images, settings, cache_control,
compaction blocks) and every codec's body for it is validated too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from anthropic.types.beta.message_create_params import (
    MessageCreateParamsStreaming as BetaMessageCreateParams,
)
from anthropic.types.message_create_params import MessageCreateParamsStreaming
from google.genai._gaos.types.interactions.createmodelinteraction import (
    CreateModelInteractionParam,
)
from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsStreaming
from pydantic import BaseModel, ConfigDict, TypeAdapter

from tests.providers.support import message
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
from turnstate.core._decisions import Strategy
from turnstate.core._json import compact_json
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers._protocol import ProviderAdapter, ProviderCall, ProviderResponse
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
PARAMS: dict[str, Any] = {
    "openai": ResponseCreateParamsStreaming,
    "gemini": CreateModelInteractionParam,
    "anthropic": MessageCreateParamsStreaming,
    "deepseek": CompletionCreateParamsStreaming,
    "openai-compatible": CompletionCreateParamsStreaming,
}
DIALECT: dict[str, dict[str, str]] = {
    "gemini": {
        "input[function_call].signature": "the thought signature the live API streams on a "
                                          "function_call step (recorded Interactions streams: "
                                          "step.start with \"signature\", then a "
                                          "thought_signature delta) and the thought-signatures "
                                          "guide asks back on the call; google-genai 3.6.1's "
                                          "FunctionCallStepParam has no such field",
    },
    "deepseek": {
        "thinking": "api-docs.deepseek.com/guides/thinking_mode: the thinking-mode toggle, "
                    "sent in extra_body through the OpenAI SDK",
        "messages[].reasoning_content": "api-docs.deepseek.com/guides/thinking_mode: a tool "
                                        "turn's reasoning passed back on its assistant message",
    },
}
"""Fields a provider documents that the SDK types it is checked against do not know:
``path`` (list indexes as ``[]``) → the documentation that asks for it."""

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


def calls(provider: str, case: Conversation) -> Iterator[tuple[str, ProviderCall]]:
    """The case's calls: replay (every provider), and for durable ones a cursor call."""
    model = DEFAULT_REGISTRY.model(provider, MODELS[provider])
    durable = provider in ("openai", "gemini")
    base = ProviderCall(strategy=Strategy.REPLAY if durable else Strategy.LOCAL_LOOP,
                        model=model, system_prompt="Be brief.", tools=(WEATHER,),
                        history=case.history(provider, model.name), user_text="Go on.",
                        **case.fields(provider, model.name))
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


def dropped_keys(sent: Any, kept: Any, path: str = "") -> list[str]:
    """Paths of keys in ``sent`` that validation dropped (``kept``); drains the lazy
    iterables pydantic returns for ``Iterable[...]`` fields, validating their items."""
    if isinstance(sent, dict) and isinstance(kept, BaseModel):
        # A response model accepted as a param (anthropic's content blocks): its extras
        # are the keys it does not know.
        extra = set(kept.model_extra or {})
        known = {k: getattr(kept, k) for k in type(kept).model_fields if k not in extra}
        kept = known
    if isinstance(sent, dict):
        kept = kept if isinstance(kept, dict) else {}
        out = []
        for key, value in sent.items():
            where = f"{path}.{key}" if path else key
            out += [where] if key not in kept else dropped_keys(value, kept[key], where)
        return out
    if isinstance(sent, list):
        items = list(kept) if not isinstance(kept, (str, bytes, dict)) else []
        return [p for i, value in enumerate(sent)
                for p in dropped_keys(value, items[i] if i < len(items) else None,
                                      f"{path}[{_item_type(value)}]")]
    return []


def _item_type(value: Any) -> str:
    """A list item's ``type`` in a path (``input[function_call].signature``), or ""."""
    kind = value.get("type") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) else ""


def unknown_fields(provider: str, body: dict[str, Any]) -> list[str]:
    """What the SDK types reject or do not know, dialect fields excepted."""
    types = PARAMS[provider]
    if provider == "anthropic" and "compaction" in json.dumps(body):
        types = BetaMessageCreateParams  # compaction blocks are beta params only
    adapter = ADAPTERS_BY_TYPE.get(types)
    if adapter is None:  # kept alive: the lazy iterables it returns validate through it
        # Wrapped in a tuple so that the config applies (google-genai's file-input
        # union holds ``IO[bytes]``, which needs arbitrary types).
        adapter = ADAPTERS_BY_TYPE[types] = TypeAdapter(
            tuple[types], config=ConfigDict(arbitrary_types_allowed=True))  # type: ignore[valid-type]
    (kept,) = adapter.validate_python((body,))
    allowed = DIALECT.get(provider, {})
    return [path for path in dropped_keys(body, kept) if path not in allowed]


ADAPTERS_BY_TYPE: dict[Any, TypeAdapter[Any]] = {}


@pytest.mark.parametrize("provider", list(ADAPTERS))
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_body_validates_against_the_sdk_types(provider: str, case: Conversation) -> None:
    """Every body the codec builds for the case passes the official SDK's create params
    with unknown keys forbidden (dialect fields listed in ``DIALECT``)."""
    adapter = ADAPTERS[provider]()
    for label, call in calls(provider, case):
        body = json.loads(adapter.build_request(call).body)
        assert unknown_fields(provider, body) == [], (label, body)


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
