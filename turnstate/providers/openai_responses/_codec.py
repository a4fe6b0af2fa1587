"""OpenAI Responses requests (sans-IO): cursor, tool continuation and replay.

Request shapes (``POST {base_url}/responses``, compact JSON, always streamed):

* cursor, a turn's first call: ``previous_response_id`` = the stored cursor and
  ``input`` = the new user message only;
* cursor, after a tool iteration: ``previous_response_id`` = the newest response id
  and ``input`` = one ``function_call_output`` per tool result;
* replay: no ``previous_response_id``; ``input`` = the committed history as input
  items (from the latest compaction item this model made, when there is one: the
  API lets a stateless chain drop every item before it), then the user message,
  then (recovering in-flight tool results) this turn's calls and outputs as
  ``function_call`` / ``function_call_output`` items (a call id past the API's 64
  characters shortened alike in both, ``replay_call_id``). Message, call and compaction
  item ids (``msg_``, ``fc_``, ``cmp_``) are never sent: they are hidden cursors into
  server state the replay exists to avoid. A reasoning item is sent with its ``rs_``
  id, which the API reference requires, beside its own ``encrypted_content``.

``instructions`` and ``tools`` are not carried over by ``previous_response_id``, so
every request sends them; ``store: true`` keeps the response for the next cursor;
``context_management`` asks for server-side compaction when the call's settings
enable it. Reasoning parts are replayed only when they are this provider's and this
model's and carry ``encrypted_content`` (which the adapter asks for with
``include_encrypted_reasoning``); otherwise the server-side item is the only copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import attrs

from turnstate.core._compaction import COMPACTION_KIND, same_model
from turnstate.core._conversation import (
    OpaquePart,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    TransitionPart,
)
from turnstate.core._envelope import Mode
from turnstate.core._errors import ConfigurationError
from turnstate.core._json import JsonObject
from turnstate.core._media import ImagePart
from turnstate.core._media_output import answer_image_text
from turnstate.core._prices import OPENAI_24H_ONLY, OPENAI_EXTENDED_RETENTION
from turnstate.core._registry import ModelInfo, is_snapshot_of
from turnstate.providers._adapters import ChainedRequest, DurableAdapter, ErrorClassifier
from turnstate.providers._media import plain_text, responses_content
from turnstate.providers._opaque import replayable
from turnstate.providers._protocol import ProviderCall, StreamParser
from turnstate.providers._requests import check_base_url, check_key_transport, key_or_env
from turnstate.providers._settings import responses_fields
from turnstate.providers._tool_calls import shortened_call_id
from turnstate.providers.openai_responses._errors import PROVIDER, classify_body
from turnstate.providers.openai_responses._parser import ResponsesStreamParser

DEFAULT_BASE_URL = "https://api.openai.com/v1"
PATH = "/responses"


RETENTIONS = ("in_memory", "24h")


def check_retention(_: object, __: object, value: str | None) -> None:
    """``prompt_cache_retention`` is None, ``in_memory`` or ``24h``."""
    if value is not None and value not in RETENTIONS:
        msg = f"prompt_cache_retention must be one of {', '.join(RETENTIONS)} or None"
        raise ConfigurationError(msg)


def retention_field(retention: str, model: str) -> str | None:
    """The ``prompt_cache_retention`` to send for ``model``, None for none: a model
    that keeps its cache a day only is sent nothing (``24h`` is its default and only
    value, ``in_memory`` a 400); the models of ``OPENAI_EXTENDED_RETENTION`` take
    both; any other (gpt-4o, the minis, a model of another host) is sent nothing."""
    if any(is_snapshot_of(model, name) for name in OPENAI_24H_ONLY):
        return None
    if any(is_snapshot_of(model, name) for name in OPENAI_EXTENDED_RETENTION):
        return retention
    return None


def _openai_key(key: str) -> str:
    return key_or_env(key, "OPENAI_API_KEY")


@attrs.frozen(kw_only=True)
class OpenAIResponsesAdapter(DurableAdapter):
    """The ``ProviderAdapter`` of the OpenAI Responses API.

    Args:
        base_url: the API root; requests go to ``base_url + "/responses"``.
        api_key: sent only as ``Authorization: Bearer``; never in repr or errors.
        reasoning: sent as the request's ``reasoning`` object when given
            (e.g. ``{"effort": "low", "summary": "auto"}``).
        include_encrypted_reasoning: ask for ``reasoning.encrypted_content`` so that
            reasoning items can be replayed without their server ids.
        prompt_cache_retention: ``24h`` keeps a chat's cached prefix up to a day
            (OpenAI's extended prompt caching: a slow chat still reads it), ``in_memory``
            five to sixty minutes; sent only to a model that takes that value
            (``retention_field``) and while caching is on. None (the default): not sent.
        allow_plain_http: take a plain ``http`` ``base_url`` to another host than this
            machine with a key (``check_key_transport``); refused by default.
    """

    PROVIDER: ClassVar[str] = PROVIDER
    MODE: ClassVar[Mode] = Mode.RESPONSES
    PATH: ClassVar[str] = PATH
    PARSER: ClassVar[type[StreamParser]] = ResponsesStreamParser
    CLASSIFY: ClassVar[ErrorClassifier] = classify_body

    base_url: str = attrs.field(default=DEFAULT_BASE_URL, validator=check_base_url)
    api_key: str = attrs.field(default="", repr=False, converter=_openai_key)
    reasoning: JsonObject | None = attrs.field(default=None, eq=False)
    include_encrypted_reasoning: bool = False
    prompt_cache_retention: str | None = attrs.field(default=None,
                                                     validator=check_retention)
    allow_plain_http: bool = False

    def __attrs_post_init__(self) -> None:
        check_key_transport(self.base_url, self.api_key,
                            allow_plain_http=self.allow_plain_http)

    def auth_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def payload(self, call: ProviderCall) -> JsonObject:
        payload = request_payload(call, reasoning=self.reasoning,
                                  include_encrypted_reasoning=self.include_encrypted_reasoning)
        retention = self.prompt_cache_retention
        if retention is not None and call.cache.enabled:
            field = retention_field(retention, call.model.name)
            if field is not None:
                payload["prompt_cache_retention"] = field
        return payload


def request_payload(
    call: ProviderCall,
    *,
    reasoning: JsonObject | None = None,
    include_encrypted_reasoning: bool = False,
) -> JsonObject:
    """The JSON body of ``POST /responses`` for ``call``."""
    extras: JsonObject = {}
    if reasoning:
        extras["reasoning"] = reasoning
    if include_encrypted_reasoning:
        extras["include"] = ["reasoning.encrypted_content"]
    if call.cache.enabled and call.cache_key:
        extras["prompt_cache_key"] = call.cache_key
    extras.update(responses_fields(call.generation, has_tools=bool(call.tools),
                                   reasoning=reasoning))
    payload = REQUEST.payload(call, extras)
    if call.settings.provider_compaction_enabled:
        threshold = call.settings.threshold_for(call.model.context_limit)
        payload["context_management"] = [{"type": "compaction", "compact_threshold": threshold}]
    return payload


def function_tool(tool: ToolSpec) -> JsonObject:
    """A flat function tool, as the Responses API wants it."""
    return {"type": "function", "name": tool.name, "description": tool.description,
            "parameters": tool.parameters, "strict": False}


def user_message(parts: Sequence[Part]) -> JsonObject:
    """A user message: its text as the content string, or ``input_*`` content parts
    when it holds images or files (``providers._media``)."""
    text = plain_text(parts)
    content = text if text is not None else responses_content(parts)
    return {"type": "message", "role": "user", "content": content}


def function_output(result: ToolResultPart) -> JsonObject:
    return {"type": "function_call_output", "call_id": result.call_id, "output": result.output}


def assistant_items(parts: Sequence[Part], model: ModelInfo) -> list[JsonObject]:
    """One assistant message's parts as input items, in order.

    Consecutive text parts of one ``phase`` form one assistant message (the phase sent
    back with it); calls, results, replayable reasoning and this model's opaque items
    are items of their own; transition parts are not conversation. A generated image
    (Gemini's) is its text (``answer_image_text``): the wire's assistant message is text.
    """
    items: list[JsonObject] = []
    text: list[TextPart] = []

    def flush() -> None:
        joined = "".join(part.text for part in text)
        if joined:
            items.append(assistant_message(joined, text[0].phase))
        text.clear()

    for given in parts:
        part = given if not isinstance(given, ImagePart) else TextPart(  # generated: text
            text=answer_image_text(given), phase=text[0].phase if text else None)
        if isinstance(part, TextPart):
            if text and text[0].phase != part.phase:
                flush()
            text.append(part)
            continue
        if isinstance(part, TransitionPart):
            continue
        flush()
        item = _item(part, model)
        if item is not None:
            items.append(item)
    flush()
    return items


def assistant_message(text: str, phase: str | None) -> JsonObject:
    message: JsonObject = {"type": "message", "role": "assistant", "content": text}
    if phase:
        message["phase"] = phase
    return message


MAX_CALL_ID = 64
"""The longest ``input[].call_id`` the API takes (``string_above_max_length``)."""


def replay_call_id(call_id: str) -> str:
    """A replayed call's id, shortened past ``MAX_CALL_ID`` (``shortened_call_id``): a
    replay sends the call and its output alike, so they still pair. A cursor turn's
    outputs (``function_output``) keep the id the server issued."""
    return shortened_call_id(call_id, MAX_CALL_ID)


def _item(part: Part, model: ModelInfo) -> JsonObject | None:
    if isinstance(part, ToolCallPart):
        return {"type": "function_call", "call_id": replay_call_id(part.call_id),
                "name": part.name, "arguments": part.arguments}
    if isinstance(part, ToolResultPart):
        return {"type": "function_call_output", "call_id": replay_call_id(part.call_id),
                "output": part.output}
    if isinstance(part, ReasoningPart):
        return reasoning_item(part, model)
    if isinstance(part, OpaquePart):
        item = replayable(part, PROVIDER, model.name)
        return compaction_item(item) if part.kind == COMPACTION_KIND else item
    return None


def compaction_item(item: JsonObject | None) -> JsonObject | None:
    """A stored compaction output item as input: ``type`` and ``encrypted_content`` only
    (``ResponseCompactionItemParamParam``; its ``id`` is optional and, like every server
    item id, a hidden cursor a replay does without); None without a payload."""
    payload = item.get("encrypted_content") if item is not None else None
    if not isinstance(payload, str) or not payload:
        return None
    return {"type": "compaction", "encrypted_content": payload}


def reasoning_item(part: ReasoningPart, model: ModelInfo) -> JsonObject | None:
    """A reasoning item with its id and encrypted content, or None when it may not or
    cannot be replayed.

    The API reference's ``ResponseReasoningItemParam`` requires ``id`` (the parser
    keeps the item's ``rs_`` id in ``ReasoningPart.signature``); the item carries its
    own ``encrypted_content``, so the id is no cursor into stored state. A part stored
    before ids were kept has none and is not replayed (docs/decisions.md, 2026-12-03).
    """
    if part.provider != PROVIDER or not same_model(part.model, model.name):
        return None
    if not part.data or not part.signature:
        return None
    summary = [{"type": "summary_text", "text": part.text}] if part.text else []
    return {"type": "reasoning", "id": part.signature, "summary": summary,
            "encrypted_content": part.data}


REQUEST = ChainedRequest(system_field="instructions", cursor_field="previous_response_id",
                         cursor_noun="response id", user=user_message, result=function_output,
                         assistant=assistant_items, tool=function_tool)
