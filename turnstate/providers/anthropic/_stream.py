"""Anthropic Messages streams: events in, text and thinking deltas out, then a response.

Events: ``message_start`` (the message id, model and input usage), per content block
``content_block_start`` / ``content_block_delta`` / ``content_block_stop`` (``text_delta``,
``thinking_delta``, ``signature_delta``, ``input_json_delta``: the partials are
concatenated and parsed at the block's stop, the first may be ``""`` and an empty
whole means ``{}``; ``compaction_delta``: a ``compaction`` block starts with
``content`` and ``encrypted_content`` null and a delta carries their values, which
replace the block's, as the SDK's accumulator does), ``message_delta`` (the stop
reason and CUMULATIVE usage: the last values win, nothing is added up, and a null
count keeps the earlier one), ``message_stop`` (terminal), ``ping`` (ignored) and
``error``, which can arrive after HTTP 200 and is classified by its ``error.type`` (a
frame without a type that holds an ``error`` object, as relays write one, is an error
frame too). Unknown events and block types are ignored.

A compaction block is kept whole as an opaque ``compaction`` part; the top-level usage
counts the compacted context (what the answer was sampled from), and the compaction's
own cost (``usage.iterations``) goes to the metadata as ``compactionUsage`` and, as a
``Usage``, to ``ProviderResponse.billed_apart`` (the turn bills it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from turnstate.core._citations import Citation
from turnstate.core._context import CHARS_PER_TOKEN
from turnstate.core._conversation import Part, ReasoningPart, TextPart, ToolCallPart, Usage
from turnstate.core._cost import server_tool_metadata, tier_metadata
from turnstate.core._errors import (
    ProviderProtocolError,
)
from turnstate.core._json import JsonObject, compact_json
from turnstate.providers._citations import anthropic_citation, read_citations
from turnstate.providers._frames import (
    error_object,
    load_frame,
    object_of,
    strict_json,
    text_of,
    unhandled_name,
)
from turnstate.providers._opaque import opaque_part
from turnstate.providers._protocol import (
    ProviderEvent,
    ProviderResponse,
    SseEvent,
    reasoning_delta,
    text_delta,
)
from turnstate.providers._tool_calls import CallLimit, distinct_call_ids
from turnstate.providers.anthropic._fields import (
    compaction_metadata,
    compaction_usage,
    error_from_type,
    log_if_bug,
    merge_usage,
    read_usage,
)
from turnstate.providers.anthropic._pause import PAUSED_STOP_REASONS, paused_error

__all__ = ["AnthropicStreamParser", "assemble", "compaction_metadata", "compaction_usage",
           "error_from_type", "log_if_bug", "merge_usage", "parse_response_body",
           "read_usage"]

logger = logging.getLogger("turnstate")

STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
                "max_tokens": "length", "model_context_window_exceeded": "length",
                "refusal": "refusal"}
COMPACTION_FIELDS = ("content", "encrypted_content")
def estimated_output(blocks: Iterable[_Block]) -> int:
    """The output tokens of what the blocks streamed (text, thinking, tool input), at
    ``CHARS_PER_TOKEN``, rounded up: a floor under what a cut request generated."""
    chars = sum(sum(map(len, block.text)) + sum(map(len, block.json)) for block in blocks)
    return -(-chars // CHARS_PER_TOKEN)


class _Block:
    __slots__ = ("call_id", "citations", "data", "json", "kind", "name", "signature", "start",
                 "text")

    def __init__(self, start: JsonObject) -> None:
        self.start = start
        self.kind = text_of(start.get("type")) or ""
        self.text = [text_of(start.get("text")) or text_of(start.get("thinking")) or ""]
        self.signature = text_of(start.get("signature")) or ""
        self.data = text_of(start.get("data"))
        self.call_id = text_of(start.get("id")) or ""
        cited = start.get("citations")  # a whole block's (a body's); a stream's start []
        self.citations: list[Any] = list(cited) if type(cited) is list else []
        self.name = text_of(start.get("name")) or ""
        initial = start.get("input")
        self.json: list[str] = [compact_json(initial)] if isinstance(initial, dict) and initial \
            else []

    def part(self, provider: str, model: str) -> Part | None:
        text = "".join(self.text)
        if self.kind == "text":
            return TextPart(text=text, citations=read_citations(
                self.citations, anthropic_citation)) if text else None
        if self.kind == "thinking":
            return ReasoningPart(provider=provider, model=model, kind="thinking", text=text,
                                 signature=self.signature)
        if self.kind == "redacted_thinking":
            return ReasoningPart(provider=provider, model=model, kind="redacted_thinking",
                                 data=self.data or "")
        if self.kind == "tool_use":
            if not self.name:  # no tool to run; Anthropic refuses it sent back
                raise ProviderProtocolError(provider, f"tool_use {self.call_id!r} has no name")
            return ToolCallPart(call_id=self.call_id, name=self.name,
                                arguments=self._arguments(provider), provider=provider,
                                model=model)
        return self._opaque(provider, model)

    def merge_compaction(self, delta: JsonObject) -> None:
        """A ``compaction_delta``: each field it carries (not null) replaces the block's."""
        self.start = {**self.start, **{key: delta[key] for key in COMPACTION_FIELDS
                                       if delta.get(key) is not None}}

    def _opaque(self, provider: str, model: str) -> Part:
        """A block turnstate does not model (``server_tool_use``, ``web_search_tool_result``,
        ...): as it started, its streamed input (if any) parsed in."""
        block = dict(self.start)
        if self.json:
            block["input"] = strict_json(self._arguments(provider))
        return opaque_part(provider, model, block)

    def input_complete(self) -> bool:
        """Whether the streamed input is a whole JSON object (or empty: ``{}``)."""
        text = "".join(self.json)
        if not text.strip():
            return True
        try:
            return isinstance(strict_json(text), dict)
        except ValueError:
            return False

    def _arguments(self, provider: str) -> str:
        text = "".join(self.json)
        if not text.strip():
            return "{}"
        try:
            value = strict_json(text)
        except ValueError:
            msg = f"tool_use {self.call_id} input is not JSON: {text[:80]!r}"
            raise ProviderProtocolError(provider, msg) from None
        if not isinstance(value, dict):
            msg = f"tool_use {self.call_id} input is not a JSON object"
            raise ProviderProtocolError(provider, msg)
        return text


def _block_events(block: _Block) -> Sequence[ProviderEvent]:
    """What a block that arrived complete streams: its text or thinking, at once."""
    text = "".join(block.text)
    if text and block.kind == "text":
        return (text_delta(text),)
    if text and block.kind == "thinking":
        return (reasoning_delta(text),)
    return ()


_HANDLED = frozenset({"message_start", "content_block_start", "content_block_delta",
                      "message_delta", "message_stop", "error"})
"""The frame names the parser reads; others (``ping``, ``content_block_stop``) are skipped."""


class AnthropicStreamParser:
    """Parses one Messages stream; complete at ``message_stop``."""

    def __init__(self, provider: str = "anthropic") -> None:
        self._provider = provider
        self._id: str | None = None
        self._model = ""
        self._blocks: dict[int, _Block] = {}
        self._usage: JsonObject = {}
        self._stop_reason: str | None = None
        self._stop_details: JsonObject | None = None
        self._done = False
        self._started = False
        self.call_limit = CallLimit()  # the tool_use blocks begun, against max_tool_calls

    @property
    def done(self) -> bool:
        return self._done

    @property
    def output_started(self) -> bool:
        """A tool call has begun (text and thinking show as events already)."""
        return any(block.kind == "tool_use" for block in self._blocks.values())

    def billed(self) -> Usage | None:
        """What this request billed as far as its stream told, for a stream cut before
        ``message_stop`` (``CutUsage``): None before ``message_start``. The input, cache
        reads and cache writes are ``message_start``'s exact counts (the prompt was
        read whole before the first token); the output is the latest count the stream
        gave or, when more, an estimate over what streamed (``estimated_output``)."""
        if not self._started:
            return None
        usage = read_usage(self._usage)
        streamed = estimated_output(self._blocks.values())
        if streamed <= usage.output_tokens:
            return usage
        return attrs.evolve(usage, output_tokens=streamed)

    def cited(self) -> tuple[Citation, ...]:
        """The citations of the text blocks streamed so far (``citations_delta``s): what a
        stream cut mid-answer keeps on the text it showed (``provider_batches``)."""
        return tuple(citation for index in sorted(self._blocks)
                     if (block := self._blocks[index]).kind == "text" and block.citations
                     for citation in read_citations(block.citations, anthropic_citation))

    def feed(self, event: SseEvent) -> Sequence[ProviderEvent]:
        if unhandled_name(event, _HANDLED):  # ping, content_block_stop: never decoded
            return ()
        if event.event == "message_stop":  # its name is all it says: never decoded
            self._done = True
            return ()
        frame = load_frame(self._provider, event)
        error = error_object(frame.get("error"))  # an object, or a relay's text
        kind = text_of(frame.get("type")) or ("error" if error else event.event)  # untyped
        if kind == "content_block_delta":
            return self._delta(frame)
        if kind == "message_start":
            return self._start(object_of(frame.get("message")))
        if kind == "content_block_start":
            index = frame.get("index")
            if isinstance(index, int):
                block = _Block(object_of(frame.get("content_block")))
                if block.kind == "tool_use" and not self._was_call(index):
                    self.call_limit.begin(self._provider)
                self._blocks[index] = block
                return _block_events(block)
        elif kind == "message_delta":
            delta = object_of(frame.get("delta"))
            self._stop_reason = text_of(delta.get("stop_reason")) or self._stop_reason
            if isinstance(delta.get("stop_details"), dict):
                self._stop_details = delta["stop_details"]
            merge_usage(self._usage, object_of(frame.get("usage")))
        elif kind == "message_stop":
            self._done = True
        elif kind == "error":
            raise error_from_type(self._provider, error or {})
        return ()

    def _start(self, message: JsonObject) -> Sequence[ProviderEvent]:
        """The message's id, model and input usage; blocks a relay sent complete in it.

        A repeat of the same ``message_start`` is ignored; another message's start
        before this one's ``message_stop`` would splice two answers, so it is refused.
        """
        message_id = text_of(message.get("id"))
        if self._started:
            if message_id == self._id:
                return ()
            msg = (f"a second message_start ({message_id!r}) arrived before message "
                   f"{self._id!r} stopped")
            raise ProviderProtocolError(self._provider, msg)
        self._started = True
        self._id = message_id
        self._model = text_of(message.get("model")) or ""
        self._usage.update(object_of(message.get("usage")))
        self._stop_reason = text_of(message.get("stop_reason"))
        events: list[ProviderEvent] = []
        content = message.get("content")
        for index, block in enumerate(content if isinstance(content, list) else ()):
            if isinstance(block, dict):
                self._blocks[index] = _Block(block)
                if self._blocks[index].kind == "tool_use":
                    self.call_limit.begin(self._provider)
                events.extend(_block_events(self._blocks[index]))
        return events

    def _was_call(self, index: int) -> bool:
        """The block at ``index`` is a call already counted (a repeated start)."""
        block = self._blocks.get(index)
        return block is not None and block.kind == "tool_use"

    def _delta(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        index = frame.get("index")
        block = self._blocks.get(index) if isinstance(index, int) else None
        if block is None:
            return ()
        delta = object_of(frame.get("delta"))
        kind = delta.get("type")
        if kind == "text_delta" and (text := text_of(delta.get("text"))):
            block.text.append(text)
            return (text_delta(text),)
        if kind == "thinking_delta" and (text := text_of(delta.get("thinking"))):
            block.text.append(text)
            return (reasoning_delta(text),)
        if kind == "signature_delta":
            block.signature += text_of(delta.get("signature")) or ""
        elif kind == "input_json_delta":
            block.json.append(text_of(delta.get("partial_json")) or "")
        elif kind == "compaction_delta":
            block.merge_compaction(delta)
        elif kind == "citations_delta":
            block.citations.append(delta.get("citation"))
        return ()

    def finish(self) -> ProviderResponse:
        if not self._done:
            msg = "the stream ended before message_stop"
            raise ProviderProtocolError(self._provider, msg)
        return assemble(self._provider, response_id=self._id, model=self._model,
                        blocks=self._blocks, usage=self._usage, stop_reason=self._stop_reason,
                        stop_details=self._stop_details)


def assemble(
    provider: str,
    *,
    response_id: str | None,
    model: str,
    blocks: dict[int, _Block],
    usage: JsonObject,
    stop_reason: str | None,
    stop_details: JsonObject | None,
) -> ProviderResponse:
    if stop_reason in PAUSED_STOP_REASONS:
        raise paused_error(provider, stop_reason)
    kept, dropped = cut_tool_calls(provider, blocks, stop_reason)
    parts = distinct_call_ids(  # Anthropic refuses empty or repeated tool_use ids
        [p for i in kept if (p := blocks[i].part(provider, model)) is not None], response_id)
    metadata: JsonObject = tier_metadata(usage.get("service_tier"))
    metadata.update(server_tool_metadata(sum(
        1 for block in blocks.values() if block.kind in SERVER_TOOL_BLOCKS)))
    if stop_details:
        metadata["stopDetails"] = stop_details
    if dropped:
        metadata["droppedToolCalls"] = dropped
    metadata.update(compaction_metadata(blocks.values(), usage))
    finish = STOP_REASONS.get(stop_reason, stop_reason) if stop_reason else None
    return ProviderResponse(response_id=response_id, parts=tuple(parts), usage=read_usage(usage),
                            finish_reason=finish, metadata=metadata,
                            raw_finish_reason=stop_reason, billed_apart=compaction_usage(usage))


SERVER_TOOL_BLOCKS = frozenset({"server_tool_use", "mcp_tool_use"})
"""Blocks of a call the API ran itself (web search and fetch, code execution, an MCP
server's tool): billed per use beside the tokens."""

CUT_STOP_REASONS = frozenset({"max_tokens", "model_context_window_exceeded"})
"""Stop reasons that cut the answer where it stood."""

INTERRUPTING_STOP_REASONS = frozenset({"refusal"})
"""Stop reasons that may interrupt a block anywhere (the streaming classifiers stop
the answer mid-block): a ``tool_use`` whose input is not whole JSON is dropped, not
read (it failed the turn as malformed though the provider had answered normally)."""


def cut_tool_calls(
    provider: str, blocks: dict[int, _Block], stop_reason: str | None
) -> tuple[list[int], list[JsonObject]]:
    """The block indexes to keep, and the tool calls a length stop cut.

    Anthropic's tool-use guide: a response cut by ``max_tokens`` whose last block is a
    ``tool_use`` holds an incomplete call (retry with more tokens). That block, and
    any ``tool_use`` whose streamed input is not a whole JSON object, is dropped: the
    text already streamed stays, the call is never run, and the audit records it. A
    ``refusal`` (``INTERRUPTING_STOP_REASONS``) drops only the calls it cut mid-input.
    """
    order = sorted(blocks)
    cut = stop_reason in CUT_STOP_REASONS
    if not cut and stop_reason not in INTERRUPTING_STOP_REASONS:
        return order, []
    kept: list[int] = []
    dropped: list[JsonObject] = []
    for index in order:
        block = blocks[index]
        last = cut and index == order[-1]
        if block.kind == "tool_use" and (last or not block.input_complete()):
            dropped.append({"id": block.call_id, "name": block.name, "reason": stop_reason})
            logger.warning("[provider][cut] %s stopped (%s) inside tool call %s (%s): "
                           "the call is dropped", provider, stop_reason, block.call_id,
                           block.name)
            continue
        kept.append(index)
    return kept, dropped


def parse_response_body(body: JsonObject, provider: str = "anthropic") -> ProviderResponse:
    """A non-streaming Messages body → the response it stands for.

    Raises:
        ProviderError: the body is an error body (classified by its type).
        ProviderProtocolError: it is not a message.
    """
    if body.get("type") == "error":
        raise error_from_type(provider, object_of(body.get("error")))
    content = body.get("content")
    if body.get("type") != "message" or not isinstance(content, list):
        msg = "the body is not a message"
        raise ProviderProtocolError(provider, msg)
    blocks = {i: _Block(block) for i, block in enumerate(content) if isinstance(block, dict)}
    return assemble(provider, response_id=text_of(body.get("id")),
                    model=text_of(body.get("model")) or "", blocks=blocks,
                    usage=object_of(body.get("usage")),
                    stop_reason=text_of(body.get("stop_reason")),
                    stop_details=object_of(body.get("stop_details")) or None)
