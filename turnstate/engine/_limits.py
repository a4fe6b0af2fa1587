"""The engine's declared limits, and the input checks made before a turn takes its chat.

``TurnLimits`` bounds what one turn may ask for and what one provider response may
contain: the user's text, the output deltas and the tool calls of a response, and how
many tool handlers run at once (the rest wait their turn). Crossing a response limit
fails the call with ``StreamLimitExceeded`` (the turn aborts ``provider_failed`` with a
detail naming the limit); the stream's own limits (time, bytes, line size) live on the
transport (``StreamLimits``).

``check_input`` refuses bad input with ``InvalidInput`` before any lease is taken or
any provider is called: text UTF-8 cannot encode, user text over the limit, a user
message of nothing but whitespace (no image, no file), inline image and file bytes over
the limit, tools that cannot be hashed or that share a name.
``check_content`` refuses an image or a file the turn's model does not take.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from turnstate.core._content import (
    DEFAULT_MAX_INLINE_BYTES,
    capability_problem,
    inline_problem,
)
from turnstate.core._context import CHARS_PER_TOKEN, ContextSettings
from turnstate.core._conversation import Tool, ToolSpec
from turnstate.core._errors import ConfigurationError, InvalidInput, StreamLimitExceeded
from turnstate.core._generation import GenerationSettings, check_settings
from turnstate.core._hashing import EMPTY_TOOLSET_HASH, toolset_hash
from turnstate.core._media import FilePart, ImagePart
from turnstate.core._registry import ModelInfo, ProviderCapability, Registry
from turnstate.core._response_format import check_json_word
from turnstate.core._text import surrogate_problem
from turnstate.engine._turn_input import TurnInput
from turnstate.providers._protocol import thinks_by_default


def _positive(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    """A limit is a whole number from 1 (``True``, ``1.5`` and ``inf`` were taken; a
    string or 0 raised attrs' bare ``TypeError`` / ``ValueError``)."""
    if type(value) is not int or value < 1:
        msg = f"TurnLimits.{attribute.name} must be a whole number from 1, got {value!r}"
        raise ConfigurationError(msg)


def _seconds(value: object) -> bool:
    """A positive number of seconds (``inf``: no timeout); not a bool, not NaN (which
    ``asyncio.wait_for`` would arm as a timer the loop cannot order)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


DEFAULT_TURN_SECONDS = 1800.0
"""A turn's deadline unless ``TurnLimits.turn_seconds`` or the turn says otherwise: long
enough for a tool loop of several slow reasoning calls, short of the hours a turn could
run before (the lease, a server's per-owner turn slot and a client held all along)."""


def _duration(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    """A duration is a positive number of seconds (``inf``: none); not a bool, not NaN."""
    if not _seconds(value):
        msg = (f"TurnLimits.{attribute.name} must be a positive number of seconds, "
               f"got {value!r}")
        raise ConfigurationError(msg)


@attrs.frozen(kw_only=True)
class TurnLimits:
    """Per-turn limits of ``TurnEngine`` (every one must be positive).

    Attributes:
        max_user_text: characters of user text a turn accepts (default 1 MiB of them).
        max_output_deltas: text and reasoning deltas one provider response may stream.
        max_tool_calls: tool calls one provider response may ask for.
        max_concurrent_tools: tool handlers running at once in a turn; more calls wait.
        max_inline_bytes: inline image and file bytes one turn's content may carry
            (default 20 MiB); URL parts do not count.
        max_tool_result_chars: characters of one tool result the model is sent (and the
            answer stores); a longer one is cut, with a note saying so. None (the
            default): a quarter of the model's context window, at 4 characters a token.
        turn_seconds: how long one turn may run, counted from when its begin was sent
            (default 30 minutes; ``inf``: no deadline; ``TurnInput.deadline_seconds``
            overrides it per turn). Past it the turn ends ``aborted`` with reason
            ``deadline_exceeded``: the provider call or tool run in flight is cancelled,
            a provider retry whose wait would end past it is not attempted, the lease is
            released and the bill of the requests sent is kept. A turn already committing
            ends as its commit decides. Without it a turn was bounded by nothing but its
            calls' own limits: attempts of up to ``max_stream_seconds`` each, per tool
            iteration, plus retry waits and tool handlers: hours.
    """

    max_user_text: int = attrs.field(default=1 << 20, validator=_positive)
    max_output_deltas: int = attrs.field(default=100_000, validator=_positive)
    max_tool_calls: int = attrs.field(default=128, validator=_positive)
    max_concurrent_tools: int = attrs.field(default=8, validator=_positive)
    max_inline_bytes: int = attrs.field(default=DEFAULT_MAX_INLINE_BYTES, validator=_positive)
    max_tool_result_chars: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(_positive))
    turn_seconds: float = attrs.field(default=DEFAULT_TURN_SECONDS, validator=_duration)


DEFAULT_TURN_LIMITS = TurnLimits()


def tool_result_chars(limits: TurnLimits, model: ModelInfo) -> int:
    """The characters of one tool result ``model`` is sent: the limit set, else a quarter
    of its context window (a result that alone overflows the window aborted the turn
    ``context_overflow``, or the provider refused it)."""
    if limits.max_tool_result_chars is not None:
        return limits.max_tool_result_chars
    return max(1, model.context_limit * CHARS_PER_TOKEN // 4)


def check_turn(turn: TurnInput, limits: TurnLimits, registry: Registry,
               adapter_of: Callable[[str], object]) -> tuple[str, ProviderCapability, ModelInfo]:
    """Every check a turn passes before it takes its chat's lease, in this order: its
    input, its provider and adapter (``adapter_of``), its model, its settings, the
    model's input types. The engine's (``TurnLife._begin``) and any caller's that must
    know before a turn starts. (The server's regenerate called it before deleting the
    question; now the turn's own begin cuts the chat, ``TurnInput.replace_from``.)
    Returns the toolset's digest, the provider's capability and the model.

    Raises:
        InvalidInput: naming the field.
        ConfigurationError: an unknown provider (or one ``adapter_of`` refuses).
    """
    tools_digest = check_input(turn, limits)
    capability = registry.provider(turn.provider)
    adapter = adapter_of(turn.provider)
    model = registry.model(turn.provider, turn.model)
    names = [t.spec.name for t in turn.tools] if turn.tools else []  # no comprehension run
    check_settings(turn.settings, capability, model, names,
                   thinking_by_default=thinks_by_default(adapter, turn.settings, model))
    check_content(turn, model)
    check_json_word(turn.settings.response_format, capability.name, turn.system_prompt,
                    turn.user_text)
    return tools_digest, capability, model


def check_input(turn: TurnInput, limits: TurnLimits) -> str:
    """Refuse ``turn`` before it takes a lease; return the digest of its toolset.

    The digest is taken here, where a toolset that cannot be encoded is refused, and the
    turn's context reuses it (a turn with tools hashed them twice; issue 26).

    Raises:
        InvalidInput: naming the field that is wrong.
    """
    problem = input_problem(turn, limits)
    if problem is None:
        if not turn.tools:  # most turns: the empty toolset's digest, no comprehension run
            return EMPTY_TOOLSET_HASH
        try:
            return toolset_hash([t.spec.as_mapping() for t in turn.tools])
        except (TypeError, ValueError) as exc:  # a spec changed after it was checked
            problem = "tools", f"cannot be encoded as JSON ({exc})"
    raise InvalidInput(*problem)


def input_problem(turn: TurnInput, limits: TurnLimits) -> tuple[str, str] | None:
    """The (field, problem) that makes ``turn`` unacceptable, or None (all but the
    toolset's encoding, which ``check_input`` checks as it takes the digest)."""
    wrong = type_problem(turn)
    if wrong is not None:
        return wrong
    if not turn.model or turn.model != turn.model.strip():  # no provider has such a model;
        return "model", (  # the lenient registry took it and the provider refused it
            f"must name a model, without surrounding whitespace, got {turn.model!r}")
    for field, text in (("user_text", turn.user_text), ("system_prompt", turn.system_prompt)):
        unencodable = surrogate_problem(text)
        if unencodable is not None:
            return field, unencodable
    if len(turn.user_text) > limits.max_user_text:
        return "user_text", (f"{len(turn.user_text)} characters, over the limit of "
                             f"{limits.max_user_text}")
    if not turn.user_text or turn.user_text.isspace():
        blank = _blank_problem(turn)
        if blank is not None:
            return blank
    problem = inline_problem(turn.content, limits.max_inline_bytes)
    if problem is not None:
        return problem
    if turn.tools:
        names = [t.spec.name for t in turn.tools]
        if len(set(names)) != len(names):
            return "tools", "two tools share a name"
    return None


def _blank_problem(turn: TurnInput) -> tuple[str, str] | None:
    """A turn whose text is empty or whitespace asks nothing unless its content holds an
    image or a file: Anthropic refuses such a user message (a text block must hold
    non-whitespace text), and once stored on another provider every later Anthropic
    replay of the chat sent it (the server refuses a blank ``text`` alike)."""
    if any(isinstance(p, ImagePart | FilePart) for p in turn.content):
        return None
    field = "content" if turn.content else "user_text"
    return field, "must hold text other than whitespace, or an image or a file"


MAX_TURN_ID = 128
"""The longest ``TurnInput.turn_id`` (characters): a UUID is 32 or 36, a ULID 26."""


def turn_id_problem(turn_id: str) -> tuple[str, str] | None:
    """Why a given ``turn_id`` cannot name a turn, or None: an id is 1 to
    ``MAX_TURN_ID`` printable ASCII characters, no space. It keys the turn and its
    messages (``<turn id>:user``) and goes into ``X-Turn-Id`` headers and URLs; ``""``
    was replaced by a generated id silently, and a 100 KB id was stored as it came."""
    if (0 < len(turn_id) <= MAX_TURN_ID and turn_id.isascii() and turn_id.isprintable()
            and " " not in turn_id):
        return None
    return "turn_id", (f"must be None (a new id) or 1 to {MAX_TURN_ID} printable ASCII "
                       f"characters without spaces, got {len(turn_id)} characters")


_TEXT_FIELDS = ("provider", "model", "system_prompt", "user_text")
_OPTIONAL_TEXT_FIELDS = ("turn_id", "owner")
_RECORD_FIELDS = (("settings", GenerationSettings), ("context", ContextSettings))


def type_problem(turn: TurnInput) -> tuple[str, str] | None:
    """The first field of ``turn`` whose type is wrong (``TurnInput`` converts but does
    not check types; a wrong one failed deep inside the engine, some after the lease)."""
    if (type(turn.provider) is str and type(turn.model) is str  # the usual turn, in one
            and type(turn.system_prompt) is str and type(turn.user_text) is str  # test
            and (turn.owner is None or type(turn.owner) is str)
            and (turn.turn_id is None or (type(turn.turn_id) is str
                                          and turn_id_problem(turn.turn_id) is None))
            and type(turn.tools) is tuple and not turn.tools
            and type(turn.settings) is GenerationSettings
            and type(turn.context) is ContextSettings):  # (issue 26; tested equal)
        return _flag_problem(turn)
    return _field_problem(turn)


def _field_problem(turn: TurnInput) -> tuple[str, str] | None:
    """``type_problem`` field by field."""
    for name in _TEXT_FIELDS:
        if not isinstance(getattr(turn, name), str):
            return name, f"must be a string, got {type(getattr(turn, name)).__name__}"
    for name in _OPTIONAL_TEXT_FIELDS:
        value = getattr(turn, name)
        if value is not None and not isinstance(value, str):
            return name, f"must be a string or None, got {type(value).__name__}"
    if turn.turn_id is not None and (bad_id := turn_id_problem(turn.turn_id)):
        return bad_id
    if turn.tools and not all(isinstance(t, Tool) for t in turn.tools):
        return "tools", "must be Tool objects"
    for index, each in enumerate(turn.tools):
        wrong = _tool_problem(each)
        if wrong is not None:
            return f"tools[{index}].{wrong[0]}", wrong[1]
    for name, kind in _RECORD_FIELDS:
        if not isinstance(getattr(turn, name), kind):
            return name, f"must be a {kind.__name__}"
    return _flag_problem(turn)


def _tool_problem(tool: Tool) -> tuple[str, str] | None:
    """The field of ``tool`` whose type is wrong (a dict for ``spec`` raised
    ``AttributeError`` in the engine; a None handler failed only when called)."""
    spec: object = tool.spec
    if not isinstance(spec, ToolSpec):
        return "spec", f"must be a ToolSpec, got {type(spec).__name__}"
    handler: object = tool.handler
    if not callable(handler):
        return "handler", f"must be an async function, got {type(handler).__name__}"
    if not _seconds(tool.timeout):
        return "timeout", f"must be a positive number of seconds, got {tool.timeout!r}"
    return None


def _flag_problem(turn: TurnInput) -> tuple[str, str] | None:
    """The first of the turn's flags and numbers whose type or range is wrong."""
    recover: object = turn.recover_tool_results  # "no" was taken as True
    if recover is not None and type(recover) is not bool:
        return "recover_tool_results", f"must be True, False or None, got {recover!r}"
    compaction: object = turn.context.provider_compaction_enabled
    if type(compaction) is not bool:
        return "context.provider_compaction_enabled", f"must be True or False, got {compaction!r}"
    threshold = turn.context.compact_threshold  # an adapter builds its request from it
    if threshold is not None and (type(threshold) is not int or threshold < 1):
        return "context.compact_threshold", f"must be a whole number of tokens, got {threshold!r}"
    limit = turn.tool_iteration_limit
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        return "tool_iteration_limit", f"must be a whole number from 0, got {limit!r}"
    deadline = turn.deadline_seconds
    if deadline is not None and not _seconds(deadline):
        return "deadline_seconds", f"must be a positive number of seconds, got {deadline!r}"
    return None


def turn_seconds(turn: TurnInput, limits: TurnLimits) -> float:
    """How long ``turn`` may run: its own ``deadline_seconds``, else the engine's."""
    return limits.turn_seconds if turn.deadline_seconds is None else turn.deadline_seconds


def check_content(turn: TurnInput, model: ModelInfo) -> None:
    """Refuse an image or a file ``model`` does not take (``ModelInfo.inputs``), before
    the lease and before any request.

    Raises:
        InvalidInput: naming the part (``content[1]``).
    """
    problem = capability_problem(turn.content, model)
    if problem is not None:
        raise InvalidInput(*problem)


class ResponseBudget:
    """Counts one response's deltas and tool calls against ``TurnLimits``."""

    def __init__(self, provider: str, limits: TurnLimits) -> None:
        self.provider, self.limits, self.deltas = provider, limits, 0

    def take_deltas(self, count: int) -> int:
        """Count a chunk's ``count`` deltas: how many of them the response may still
        stream (all but those past ``max_output_deltas``). Once per chunk, not per
        delta (issue 26); ``refusal`` is the error for the rest."""
        taken = min(count, max(self.limits.max_output_deltas - self.deltas, 0))
        self.deltas += count
        return taken

    def refusal(self) -> StreamLimitExceeded:
        """What a response that streamed more than ``max_output_deltas`` fails with."""
        return StreamLimitExceeded(self.provider, "max_output_deltas",
                                   f"more than {self.limits.max_output_deltas} deltas")

    def tool_calls(self, count: int) -> None:
        if count > self.limits.max_tool_calls:
            raise StreamLimitExceeded(self.provider, "max_tool_calls",
                                      f"{count} tool calls, more than "
                                      f"{self.limits.max_tool_calls}")
