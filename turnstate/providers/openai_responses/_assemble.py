"""Assembling a Responses API response from its final items, shared by the stream parser's
finish and non-streaming bodies: parts, finish reason, usage and the failure's error."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeGuard

from turnstate.core._citations import Citation
from turnstate.core._conversation import (
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    Usage,
)
from turnstate.core._cost import server_tool_metadata, tier_metadata
from turnstate.core._errors import FatalProviderError, ProviderError, ProviderProtocolError
from turnstate.core._frozen import slot_maker
from turnstate.core._json import JsonObject
from turnstate.providers._citations import openai_citation, read_citations, shifted
from turnstate.providers._errors import CANCELLED, cancelled_error
from turnstate.providers._frames import int_field, text_of
from turnstate.providers._opaque import opaque_part
from turnstate.providers._protocol import (
    ProviderResponse,
    provider_response,
)
from turnstate.providers._tool_calls import PARALLEL_WRAPPER
from turnstate.providers.openai_responses._errors import (
    PROVIDER,
    classify_fields,
)


def failed_error(response: Mapping[str, Any]) -> ProviderError:
    """The classified error of a failed response (``response.error``)."""
    error = response.get("error")
    if isinstance(error, Mapping):
        return classify_fields(None, {}, error)
    return FatalProviderError(PROVIDER, "the response failed without an error object")


def parse_response_body(body: Mapping[str, Any]) -> ProviderResponse:
    """A non-streaming ``POST /responses`` body (``"stream": false``) as a response.

    Raises:
        ProviderError: the body is a failed response.
    """
    if body.get("status") == "failed":
        raise failed_error(body)
    output = body.get("output")
    items = [item for item in output if isinstance(item, dict)] if isinstance(output, list) else []
    return build_response(body, items, fallback_id=None)


SERVER_TOOL_ITEMS = frozenset({"web_search_call", "file_search_call",
                               "code_interpreter_call", "image_generation_call", "mcp_call"})
"""Output items of a built-in tool OpenAI ran itself: billed per call (web and file
search, a code interpreter container) or in tokens of their own (images) beside the
response's usage."""


def build_response(
    final: Mapping[str, Any], items: Sequence[Mapping[str, Any]], *, fallback_id: str | None
) -> ProviderResponse:
    model = text_of(final.get("model")) or ""
    parts: list[Part] = []
    compactions: list[str] = []
    refused = False
    servers = 0  # the built-in tools OpenAI ran (SERVER_TOOL_ITEMS), counted in this loop
    for item in items:
        kind = text_of(item.get("type"))  # a list or an object is no item type
        if kind == "message":
            text, refusal, cited = _message_text(item)
            refused = refused or refusal
            if text:
                parts.append(_text_part(text, text_of(item.get("phase")), cited))
        elif kind == "function_call":
            refuse_parallel_wrapper(item)
            name = text_of(item.get("name"))
            if not name:  # no tool to run, and no call its output could answer
                msg = f"function_call item {item.get('id')!r} has no name"
                raise ProviderProtocolError(PROVIDER, msg)
            parts.append(ToolCallPart(
                call_id=text_of(item.get("call_id")) or "", name=name,
                arguments=text_of(item.get("arguments")) or "", provider=PROVIDER, model=model))
        elif kind == "reasoning":
            parts.append(_reasoning_part(item, model))
        elif kind == "compaction":  # kept whole: a replay may start from it
            compactions.append(text_of(item.get("id")) or "")
            parts.append(opaque_part(PROVIDER, model, dict(item)))
        else:
            servers += kind in SERVER_TOOL_ITEMS
            parts.append(opaque_part(PROVIDER, model, dict(item)))
    metadata: JsonObject = tier_metadata(final.get("service_tier"))
    if servers:
        metadata.update(server_tool_metadata(servers))
    if compactions:
        metadata.update(compacted=True, compactionItemIds=compactions)
    # response_id, parts, usage, finish_reason, metadata, raw_finish_reason, billed_apart
    return provider_response(text_of(final.get("id")) or fallback_id, parts,
                             usage_of(final.get("usage")), _finish_reason(final, parts, refused),
                             metadata, raw_finish_reason(final), None)


def raw_finish_reason(final: Mapping[str, Any]) -> str | None:
    """The response's ``status``, or for an incomplete one its ``incomplete_details.reason``."""
    details = final.get("incomplete_details")
    reason = details.get("reason") if _is_mapping(details) else None
    if final.get("status") == "incomplete" and isinstance(reason, str):
        return reason
    return text_of(final.get("status"))


def refuse_parallel_wrapper(item: Mapping[str, Any]) -> None:
    """Fail on a ``multi_tool_use.parallel`` call: the stored response expects one output
    for the wrapper's ``call_id``, so its inner calls cannot be answered one by one."""
    if item.get("name") == PARALLEL_WRAPPER:
        msg = (f"the model called the {PARALLEL_WRAPPER} wrapper ({item.get('call_id')}); "
               "it is not a tool, and a stored response cannot take its calls' outputs")
        raise ProviderProtocolError(PROVIDER, msg)


def message_citations(items: Iterable[Mapping[str, Any]]) -> tuple[Citation, ...]:
    """The citations of the message items' text, each item's spans its own (as on the
    text parts ``build_response`` makes): what a stream cut mid-answer keeps."""
    return tuple(citation for item in items if item.get("type") == "message"
                 for citation in _message_text(item)[2])


def _message_text(item: Mapping[str, Any]) -> tuple[str, bool, tuple[Citation, ...]]:
    """A message item's text, whether it is a refusal, and its ``output_text`` blocks'
    annotations (a later block's spans moved by the text before it)."""
    content = item.get("content")
    texts: list[str] = []
    refused = False
    cited: tuple[Citation, ...] = ()
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "output_text":
            if block.get("annotations"):
                found = read_citations(block["annotations"], openai_citation)
                cited += shifted(found, sum(map(len, texts))) if texts else found
            texts.append(text_of(block.get("text")) or "")
        elif block.get("type") == "refusal":
            texts.append(text_of(block.get("refusal")) or "")
            refused = True
    return "".join(texts), refused, cited


def _reasoning_part(item: Mapping[str, Any], model: str) -> ReasoningPart:
    texts: list[str] = []
    for key in ("summary", "content"):
        blocks = item.get(key)
        for block in blocks if isinstance(blocks, list) else []:
            if isinstance(block, dict) and text_of(block.get("text")):
                texts.append(block["text"])
        if texts:
            break
    return ReasoningPart(provider=PROVIDER, model=model, kind="reasoning",
                         text="\n\n".join(texts), data=text_of(item.get("encrypted_content")),
                         signature=text_of(item.get("id")))


def _finish_reason(final: Mapping[str, Any], parts: Sequence[Part], refused: bool) -> str:
    status = final.get("status")
    if status == CANCELLED:  # a cancelled background response: not a finished answer
        raise cancelled_error(PROVIDER, "response")
    if status == "incomplete":
        details = final.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, Mapping) else None
        if reason == "content_filter":
            return "content_filter"
        return "length" if reason in (None, "max_output_tokens") else str(reason)
    if any(isinstance(p, ToolCallPart) for p in parts):
        return "tool_calls"
    return "refusal" if refused else "stop"


def _is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, a decoded frame's dict answered without the ABC's
    check."""
    return type(value) is dict or isinstance(value, Mapping)


def usage_of(usage: Any) -> Usage:
    """``response.usage`` in engine terms (input includes cached tokens already)."""
    if not _is_mapping(usage):
        return Usage()
    inputs = usage.get("input_tokens_details")
    outputs = usage.get("output_tokens_details")
    inputs = inputs if _is_mapping(inputs) else _NO_DETAILS
    outputs = outputs if _is_mapping(outputs) else _NO_DETAILS
    # input, output, cached input, reasoning, cache hit, cache miss, cache write,
    # one-hour cache write
    return _usage(int_field(usage.get("input_tokens")), int_field(usage.get("output_tokens")),
                  int_field(inputs.get("cached_tokens")),
                  int_field(outputs.get("reasoning_tokens")), None, None,
                  int_field(inputs.get("cache_write_tokens")), 0)


_NO_DETAILS: Mapping[str, Any] = {}
_usage: Callable[[int, int, int, int, int | None, int | None, int, int], Usage] = slot_maker(Usage)
_text_part: Callable[[str, str | None, tuple[Citation, ...]], TextPart] = slot_maker(TextPart)
"""The answer's records without attrs' ``__init__`` (``core._frozen``; issue 26)."""
