"""Gemini Interactions requests (sans-IO), in the current "steps" format.

Request shapes (``POST {base_url}/interactions``, header ``x-goog-api-key``):

* cursor, a turn's first call: ``previous_interaction_id`` = the stored cursor and
  ``input`` = one ``user_input`` step;
* cursor, after a tool iteration: ``previous_interaction_id`` = the newest interaction
  and ``input`` = one ``function_result`` step per tool result;
* replay: no cursor; ``input`` = the committed history as steps (``user_input``,
  ``model_output``, ``function_call`` with an arguments object, ``function_result``),
  then the new ``user_input``, then (recovering in-flight tool results) this turn's
  ``function_call`` and ``function_result`` steps.

``system_instruction``, ``tools`` and ``generation_config`` are scoped to one
interaction, so every request sends them. Thought signatures (on ``thought`` steps,
function calls and ``model_output`` steps) are replayed only to the provider and model
that issued them; a ``thought`` step is sent with its signature alone, and a
``text_signature`` part goes back on the ``model_output`` step of the text before it.
An opaque step is replayed only when its type is a documented server-tool step
(``REPLAYED_OPAQUE_STEPS``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import ClassVar

import attrs

from turnstate.core._compaction import same_model
from turnstate.core._content import for_model
from turnstate.core._conversation import (
    OpaquePart,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from turnstate.core._envelope import Mode
from turnstate.core._json import JsonObject, compact_json, nested_deeper
from turnstate.core._media import ImagePart
from turnstate.core._registry import ModelInfo
from turnstate.providers._adapters import ChainedRequest, DurableAdapter, ErrorClassifier
from turnstate.providers._media import interactions_content, plain_text
from turnstate.providers._opaque import replayable
from turnstate.providers._protocol import ProviderCall, StreamParser
from turnstate.providers._requests import check_base_url, check_key_transport, key_or_env
from turnstate.providers._schema_refs import inline_refs
from turnstate.providers._settings import gemini_generation_config, gemini_response_format
from turnstate.providers.gemini_interactions._errors import PROVIDER, classify_body
from turnstate.providers.gemini_interactions._parser import (
    SERVER_STEP_TYPES,
    TEXT_SIGNATURE,
    InteractionsStreamParser,
)

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
PATH = "/interactions"


def _gemini_key(key: str) -> str:
    return key_or_env(key, "GEMINI_API_KEY")


@attrs.frozen(kw_only=True)
class GeminiInteractionsAdapter(DurableAdapter):
    """The ``ProviderAdapter`` of the Gemini Interactions API.

    Args:
        base_url: the API root; requests go to ``base_url + "/interactions"``.
        api_key: sent only as ``x-goog-api-key``; never in repr or errors.
        generation_config: sent as ``generation_config`` with every request when given
            (``max_output_tokens``, ``thinking_level``, ``thinking_summaries``, ...).
        allow_plain_http: take a plain ``http`` ``base_url`` to another host than this
            machine with a key (``check_key_transport``); refused by default.
    """

    PROVIDER: ClassVar[str] = PROVIDER
    MODE: ClassVar[Mode] = Mode.INTERACTIONS
    PATH: ClassVar[str] = PATH
    PARSER: ClassVar[type[StreamParser]] = InteractionsStreamParser
    CLASSIFY: ClassVar[ErrorClassifier] = classify_body

    base_url: str = attrs.field(default=DEFAULT_BASE_URL, validator=check_base_url)
    api_key: str = attrs.field(default="", repr=False, converter=_gemini_key)
    generation_config: JsonObject | None = attrs.field(default=None, eq=False)
    allow_plain_http: bool = False

    def __attrs_post_init__(self) -> None:
        check_key_transport(self.base_url, self.api_key,
                            allow_plain_http=self.allow_plain_http)

    def auth_headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self.api_key} if self.api_key else {}

    def payload(self, call: ProviderCall) -> JsonObject:
        return request_payload(call, generation_config=self.generation_config)


def request_payload(
    call: ProviderCall, *, generation_config: JsonObject | None = None
) -> JsonObject:
    """The JSON body of ``POST /interactions`` for ``call`` (the turn's settings over the
    adapter's ``generation_config``)."""
    config = gemini_generation_config(call.generation, has_tools=bool(call.tools),
                                      base=generation_config)
    extras: JsonObject = {"generation_config": config} if config else {}
    response_format = gemini_response_format(call.generation)
    if response_format is not None:
        extras["response_format"] = response_format
    return REQUEST.payload(call, extras)


def function_tool(tool: ToolSpec) -> JsonObject:
    """A function declaration; local ``$ref`` inlined (Gemini refuses ``$ref``/``$defs``)."""
    parameters = inline_refs(tool.parameters, f"tools[{tool.name}].parameters")
    return {"type": "function", "name": tool.name, "description": tool.description,
            "parameters": parameters}


def user_input(parts: Sequence[Part]) -> JsonObject:
    """A ``user_input`` step: one text content for a text message (empty text kept, as
    always), else the text, image and document content in order."""
    text = plain_text(parts)
    content = [{"type": "text", "text": text}] if text is not None else interactions_content(parts)
    return {"type": "user_input", "content": content}


def function_result(result: ToolResultPart) -> JsonObject:
    return {"type": "function_result", "name": result.name, "call_id": result.call_id,
            "result": result.output, "is_error": result.is_error}


def model_steps(parts: Sequence[Part], model: ModelInfo) -> list[JsonObject]:
    """One assistant message's parts as steps, in order (consecutive text joined; a
    generated image an ``image`` block of the ``model_output`` before it)."""
    steps: list[JsonObject] = []
    text: list[str] = []

    def flush() -> None:
        joined = "".join(text)
        if joined:
            steps.append({"type": "model_output", "content": [{"type": "text", "text": joined}]})
        text.clear()

    for part in parts:
        if isinstance(part, TextPart):
            text.append(part.text)
        elif isinstance(part, ToolCallPart):
            flush()
            steps.append(function_call(part, model))
        elif isinstance(part, ToolResultPart):
            flush()
            steps.append(function_result(part))
        elif isinstance(part, ReasoningPart):
            flush()
            if not _replayable(part.provider, part.model, model) or not part.signature:
                continue
            if part.kind != TEXT_SIGNATURE:
                steps.append({"type": "thought", "signature": part.signature})
            elif steps and steps[-1]["type"] == "model_output":
                steps[-1]["signature"] = part.signature  # the text just before it
        elif isinstance(part, ImagePart):  # a generated image: model content
            flush()
            _add_image(steps, answer_image(part, model))
        elif isinstance(part, OpaquePart):
            flush()
            if part.kind not in REPLAYED_OPAQUE_STEPS:  # Gemini refuses it (400)
                continue
            step = replayable(part, PROVIDER, model.name)
            if step is not None:
                steps.append(step)
    flush()
    return steps


def _add_image(steps: list[JsonObject], block: JsonObject) -> None:
    """An answer's image block into the ``model_output`` step just before it (its text's,
    unsigned yet), else a step of its own."""
    if steps and steps[-1]["type"] == "model_output" and not steps[-1].get("signature"):
        steps[-1]["content"].append(block)
    else:
        steps.append({"type": "model_output", "content": [block]})


def answer_image(part: ImagePart, model: ModelInfo) -> JsonObject:
    """An answer's image (``core._media_output``) as ``model_output`` content: its
    ``image`` block, or its text when ``model`` takes no image (``for_model``)."""
    sent = for_model((part,), model)[0]
    if isinstance(sent, ImagePart):
        return interactions_content((sent,))[0]
    return {"type": "text", "text": sent.text if isinstance(sent, TextPart) else ""}


REPLAYED_OPAQUE_STEPS = SERVER_STEP_TYPES
"""The opaque steps a replay sends back: the documented server-tool steps (2.3). A step
of a type Gemini does not document (one added after this codec, or a relay's) stays in
the stored answer but is never replayed: Gemini answers 400 "Invalid step type" to a
type it does not know, and that would fail every later replay of the chat."""


def function_call(part: ToolCallPart, model: ModelInfo) -> JsonObject:
    step: JsonObject = {"type": "function_call", "id": part.call_id, "name": part.name,
                        "arguments": arguments_object(part.arguments)}
    if part.signature and _replayable(part.provider, part.model, model):
        step["signature"] = part.signature
    return step


def arguments_object(text: str) -> JsonObject:
    """The call's JSON arguments as an object (Interactions wants an object); as
    ``{"arguments": text}`` when they are not JSON, not writable or nested deeper than
    ``MAX_DEPTH`` (a model's arguments nested 5,000 deep, stored as sent, made every
    later request of the chat fail to build)."""
    try:
        value = json.loads(text) if text.strip() else {}
        if nested_deeper(text, value):
            return {"arguments": text}
        compact_json(value).encode()  # NaN, 1e999, a lone surrogate: read, not writable
    except (ValueError, RecursionError):
        return {"arguments": text}  # not JSON: keep the text rather than drop it
    return value if isinstance(value, dict) else {"arguments": value}


def _replayable(provider: str, produced: str, model: ModelInfo) -> bool:
    return provider == PROVIDER and same_model(produced, model.name)


REQUEST = ChainedRequest(system_field="system_instruction",
                         cursor_field="previous_interaction_id", cursor_noun="interaction id",
                         user=user_input, result=function_result, assistant=model_steps,
                         tool=function_tool)
