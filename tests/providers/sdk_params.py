"""Checking a request body against the official SDKs' param types (issue 24), with
unknown keys forbidden: ``unknown_fields`` lists what the types do not know, dialect
fields (``DIALECT``, each with its docs reference) excepted.

A TypedDict validates with unknown keys dropped, so a body is validated, its lazy
iterables drained (which validates their items), and the result compared with the body:
any key the types dropped is a key they do not know.
"""

from __future__ import annotations

import importlib
from typing import Any

import attrs
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

from turnstate.providers._protocol import HttpRequest

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
    "anthropic": {
        "temperature": "platform.claude.com/docs/en/api/messages/create (create.temperature) "
                       "and about-claude/model-deprecations#api-parameter-deprecations: "
                       "deprecated, still taken by the models that sample (the registry's "
                       "sampling models, Sonnet 4.5 / 4.6 among them), refused by those after "
                       "Opus 4.6; anthropic 1.0 removed it from MessageCreateParams",
        "top_p": "the same page and deprecation notice as temperature",
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


def dropped_keys(sent: Any, kept: Any, path: str = "") -> list[str]:
    """Paths of keys in ``sent`` that validation dropped (``kept``); drains the lazy
    iterables pydantic returns for ``Iterable[...]`` fields, validating their items."""
    if isinstance(sent, dict) and isinstance(kept, BaseModel):
        twin = param_twin(type(kept))
        if twin is not None:  # validated as its param twin, as the union means it
            kept = adapter_for(twin).validate_python(sent)
        else:  # a response model with no twin: its extras are the keys it does not know
            extra = set(kept.model_extra or {})
            kept = {k: getattr(kept, k) for k in type(kept).model_fields if k not in extra}
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


def param_twin(model: type[BaseModel]) -> Any:
    """The param TypedDict of a response model (anthropic ``TextBlock`` in
    ``anthropic.types.text_block`` → ``TextBlockParam`` in ``text_block_param``), or
    None. Anthropic's content unions end with the response ``ContentBlock`` models, and
    pydantic's smart union may pick one for a param dict (``TextBlock`` for a text block
    with ``cache_control``, keeping the key as an extra)."""
    try:
        module = importlib.import_module(model.__module__ + "_param")
    except ImportError:
        return None
    return getattr(module, model.__name__ + "Param", None)


def adapter_for(types: Any) -> _Unwrapped:
    """One ``TypeAdapter`` per type, kept alive: the lazy iterables it returns validate
    through it. Wrapped in a tuple so that the config applies (google-genai's file-input
    union holds ``IO[bytes]``, which needs arbitrary types)."""
    adapter = ADAPTERS_BY_TYPE.get(types)
    if adapter is None:
        adapter = ADAPTERS_BY_TYPE[types] = TypeAdapter(
            tuple[types], config=ConfigDict(arbitrary_types_allowed=True))  # type: ignore[valid-type]
    return _Unwrapped(adapter)


@attrs.frozen
class _Unwrapped:
    """``validate_python`` through the tuple-wrapped adapter."""

    adapter: TypeAdapter[Any]

    def validate_python(self, value: Any) -> Any:
        (kept,) = self.adapter.validate_python((value,))
        return kept


def _item_type(value: Any) -> str:
    """A list item's ``type`` in a path (``input[function_call].signature``), or ""."""
    kind = value.get("type") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) else ""


def unknown_fields(provider: str, body: dict[str, Any], types: Any = None) -> list[str]:
    """What the SDK types (``PARAMS[provider]`` unless given) reject or do not know,
    dialect fields excepted."""
    kept = adapter_for(types or PARAMS[provider]).validate_python(body)
    allowed = DIALECT.get(provider, {})
    return [path for path in dropped_keys(body, kept) if path not in allowed]


ADAPTERS_BY_TYPE: dict[Any, TypeAdapter[Any]] = {}


def params_for(provider: str, request: HttpRequest) -> Any:
    """The SDK type a request is checked against: Anthropic's beta params when the request
    names a beta (compaction: ``context_management`` and ``compaction`` blocks), as
    ``client.beta.messages.create`` sends them; the plain params otherwise."""
    if provider == "anthropic" and request.headers.get("anthropic-beta"):
        return BetaMessageCreateParams
    return PARAMS[provider]
