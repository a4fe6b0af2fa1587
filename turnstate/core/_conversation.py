"""The conversation as turnstate stores it and hands it to provider codecs.

A chat is an ordered list of messages; a message is an ordered tuple of parts. A turn
writes exactly two messages: the user's and one assistant message holding everything
the turn produced, in order (reasoning, tool calls, tool results, text, and the
``continuation_transition`` part when the turn degraded). Codecs render these parts
into their wire formats; nothing provider-specific is stored outside a part's fields.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from enum import StrEnum
from typing import Any

import attrs

from turnstate.core._citations import Citation, citations_field
from turnstate.core._errors import InvalidInput
from turnstate.core._json import JsonObject, compact_json
from turnstate.core._media import FilePart, ImagePart
from turnstate.core._schema import definition_problems
from turnstate.core._text import lone_surrogates


@attrs.frozen(kw_only=True)
class TextPart:
    """Visible text. ``phase`` is OpenAI's assistant-message phase (``commentary`` or
    ``final_answer``), sent back unchanged to OpenAI and ignored elsewhere.
    ``citations`` are the sources the provider said the text relies on
    (``core._citations``): stored with it, never sent back."""

    text: str
    phase: str | None = None
    citations: tuple[Citation, ...] = citations_field()


@attrs.frozen(kw_only=True)
class ReasoningPart:
    """A reasoning artefact, replayed only to the provider and model that made it.

    Attributes:
        text: the visible reasoning or summary text (may be empty).
        signature: Anthropic thinking / Gemini thought signature, verbatim; for an
            OpenAI reasoning item, its ``rs_`` id (the API requires it on replay).
        data: opaque payload (Anthropic ``redacted_thinking`` data, OpenAI
            ``encrypted_content``), verbatim.
        kind: the provider's block kind (``thinking``, ``redacted_thinking``, ``thought``,
            ``reasoning``, ``reasoning_content``).
    """

    provider: str
    model: str
    kind: str
    text: str = ""
    signature: str | None = None
    data: str | None = None


@attrs.frozen(kw_only=True)
class ToolCallPart:
    """A tool call the model made. ``arguments`` is the JSON text as the model sent it.

    ``signature`` is a Gemini thought signature attached to the call, replayed only to
    the same ``provider`` and ``model``.
    """

    call_id: str
    name: str
    arguments: str
    provider: str = ""
    model: str = ""
    signature: str | None = None


@attrs.frozen(kw_only=True)
class ToolResultPart:
    call_id: str
    name: str
    output: str
    is_error: bool = False


@attrs.frozen(kw_only=True)
class TransitionPart:
    """A degradation, recorded on the turn's assistant message.

    ``recovered`` is False while the turn runs and flipped to True by the commit.
    """

    reason: str
    strategy: str
    source_state: str
    recovered: bool = False


@attrs.frozen(kw_only=True)
class OpaquePart:
    """A content block, output item or step the codec does not model, kept verbatim.

    Server-tool calls and results, built-in tool items and whatever a provider adds
    next: never shown, never sent to another provider or model, replayed to the one
    that made it (as its codec allows) so the conversation stays whole.

    Attributes:
        kind: the wire type (``web_search_call``, ``server_tool_use``, ...).
        raw: the block as compact JSON text, exactly as it arrived.
    """

    provider: str
    model: str
    kind: str
    raw: str


Part = (TextPart | ReasoningPart | ToolCallPart | ToolResultPart | TransitionPart | OpaquePart
        | ImagePart | FilePart)
UserPart = TextPart | ImagePart | FilePart
"""What a user message holds: text, images and PDF files (``turnstate.core._media``)."""
PART_TAGS: dict[type[Any], str] = {
    TextPart: "text",
    ImagePart: "image",
    FilePart: "file",
    ReasoningPart: "reasoning",
    ToolCallPart: "tool_call",
    ToolResultPart: "tool_result",
    TransitionPart: "continuation_transition",
    OpaquePart: "opaque",
}


def opaque_counts(parts: Iterable[Part]) -> dict[str, int]:
    """How many opaque parts of each kind ``parts`` hold (the turn audit's figure)."""
    counts: dict[str, int] = {}
    for part in parts:
        if isinstance(part, OpaquePart):
            counts[part.kind] = counts.get(part.kind, 0) + 1
    return counts


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"


class MessageStatus(StrEnum):
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    ABORTED = "aborted"


@attrs.frozen(kw_only=True)
class Usage:
    """Token counts of one provider call, or summed over a turn.

    The meaning of each field is the same for all five providers (each parser maps its
    wire figures onto these):

    * ``input_tokens``: every input token the model read, cached or not. Anthropic
      reports uncached input, cache reads and cache writes separately; its parser adds
      them up. The other providers report the total already.
    * ``cached_input_tokens``: the part of ``input_tokens`` read from the provider's
      prompt cache (billed at the cache-read rate): Anthropic
      ``cache_read_input_tokens``, OpenAI ``cached_tokens``, Gemini
      ``total_cached_tokens``, DeepSeek ``prompt_cache_hit_tokens``.
    * ``cache_write_tokens``: the part of ``input_tokens`` written to the cache by this
      call (billed at the cache-write rate): Anthropic ``cache_creation_input_tokens``,
      OpenAI ``cache_write_tokens`` where reported; 0 elsewhere.
    * ``cache_write_1h_tokens``: the part of ``cache_write_tokens`` written with a
      one-hour lifetime (Anthropic ``cache_creation.ephemeral_1h_input_tokens``, billed at
      2x the input rate where five-minute writes bill 1.25x); 0 elsewhere.
    * ``output_tokens``: every generated token, reasoning included;
      ``reasoning_tokens`` is the reasoning part of it.
    * ``cache_hit_tokens`` / ``cache_miss_tokens``: DeepSeek's own prompt cache counts
      (None when the provider does not report them).

    The uncached, unwritten input is ``uncached_input_tokens``.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    cache_hit_tokens: int | None = None
    cache_miss_tokens: int | None = None
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0

    @property
    def uncached_input_tokens(self) -> int:
        """Input billed at the plain input rate: neither read from nor written to a cache."""
        return max(0, self.input_tokens - self.cached_input_tokens - self.cache_write_tokens)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cache_hit_tokens=_add_optional(self.cache_hit_tokens, other.cache_hit_tokens),
            cache_miss_tokens=_add_optional(self.cache_miss_tokens, other.cache_miss_tokens),
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cache_write_1h_tokens=self.cache_write_1h_tokens + other.cache_write_1h_tokens,
        )


def _add_optional(left: int | None, right: int | None) -> int | None:
    if left is None and right is None:
        return None
    return (left or 0) + (right or 0)


def _tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class Message:
    """One stored message. ``provider_state`` is the audit record's JSON text, never read
    for continuation."""

    id: str
    chat_id: str
    seq: int
    role: Role
    status: MessageStatus
    parts: tuple[Part, ...] = attrs.field(converter=_tuple)
    created_at: datetime
    updated_at: datetime
    provider_state: str | None = None
    usage: Usage | None = None

    def text(self) -> str:
        """The message's visible text parts, concatenated."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))


def citations_after_tools(parts: Iterable[Part]) -> tuple[Citation, ...]:
    """The citations of the text parts after the last tool result of ``parts``."""
    cited: tuple[Citation, ...] = ()
    for part in parts:
        if isinstance(part, ToolResultPart):
            cited = ()
        elif type(part) is TextPart and part.citations:
            cited += part.citations
    return cited


TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
"""A tool name every provider accepts (OpenAI, Anthropic and Gemini rules intersected)."""


@attrs.frozen(kw_only=True)
class ToolSpec:
    """A tool as providers see it: a name, a description, JSON-schema parameters.

    Checked once, when built: the name matches ``TOOL_NAME``, the description is text
    UTF-8 can encode, and the parameters are a JSON-schema object that encodes as JSON
    (``definition_problems``). Anything else raises ``InvalidInput`` here, not later in
    a turn that already holds its chat.
    """

    name: str
    description: str = ""
    parameters: JsonObject = attrs.field(factory=lambda: {"type": "object", "properties": {}})

    def __attrs_post_init__(self) -> None:
        problem = _spec_problem(self)
        if problem is not None:
            raise InvalidInput(*problem)

    def as_mapping(self) -> JsonObject:
        return {"name": self.name, "description": self.description,
                "parameters": self.parameters}


def _spec_problem(spec: ToolSpec) -> tuple[str, str] | None:
    """The (field, problem) that makes ``spec`` unusable, or None."""
    if not isinstance(spec.name, str) or TOOL_NAME.fullmatch(spec.name) is None:
        return "tool.name", f"{spec.name!r} must match {TOOL_NAME.pattern}"
    where = f"tools[{spec.name}]"
    if not isinstance(spec.description, str) or lone_surrogates(spec.description):
        return f"{where}.description", "must be text UTF-8 can encode"
    problems = definition_problems(spec.parameters)
    if not problems and lone_surrogates(compact_json(spec.parameters)):
        problems = ["holds text UTF-8 cannot encode (a lone surrogate)"]
    return (f"{where}.parameters", "; ".join(problems[:5])) if problems else None


ToolHandler = Callable[[JsonObject], Awaitable[Any]]
"""An async tool implementation: decoded arguments in, a string or JSON value out."""


@attrs.frozen(kw_only=True)
class Tool:
    """A tool the turn may run. ``timeout`` is in seconds."""

    spec: ToolSpec
    handler: ToolHandler = attrs.field(eq=False)
    timeout: float = 30.0


@attrs.frozen(kw_only=True)
class AuditState:
    """What ``messages.provider_state`` holds: how the message was produced.

    For durable turns it names the committed cursor; for stateless turns there is none,
    and it carries no loop messages: it is a record, never a continuation source.
    """

    provider: str
    model_name: str
    strategy: str
    system_prompt_hash: str
    toolset_hash: str
    cursor: str | None = None
    reason: str | None = None
    metadata: JsonObject | None = None
