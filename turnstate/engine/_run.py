"""The working memory of one running turn, and the pure helpers the driver uses.

``TurnRun`` is the driver's scratchpad for one turn: what the turn was asked, what the
provider said so far, the current provider state, the tool results in flight. It is
deliberately not persisted anywhere: durable state reaches the store only through
``TurnCommit`` (and ``decide_turn_persistence``).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import TypeVar

import attrs

from turnstate.core._compaction import compaction_chars, context_chars, history_from_compaction
from turnstate.core._content import NOT_GIVEN, content_problem, content_text, shorthand_problem
from turnstate.core._context import (
    ContextSettings,
    ContextSnapshot,
    OverflowPolicy,
    Severity,
    chain_dropped_chars,
    context_snapshot,
    estimate_tokens,
    media_chars,
    part_chars,
    part_texts,
    reports_partial_input,
)
from turnstate.core._conversation import (
    AuditState,
    Message,
    Part,
    TextPart,
    Tool,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    TransitionPart,
    Usage,
    UserPart,
    opaque_counts,
)
from turnstate.core._cost import UNPRICED_KEYS, CachePolicy, TurnCost, add_cost
from turnstate.core._decisions import (
    Strategy,
    TurnContext,
    decide_turn_persistence,
)
from turnstate.core._envelope import ContinuationEnvelope
from turnstate.core._errors import InvalidInput
from turnstate.core._events import NO_STATS, ProviderFailure, TurnStats, user_finish_reason
from turnstate.core._frozen import slot_maker
from turnstate.core._generation import NO_SETTINGS, GenerationSettings
from turnstate.core._hashing import prompt_cache_key, system_prompt_hash, toolset_hash
from turnstate.core._json import JsonObject
from turnstate.core._overflow import Calibration, CalibrationKey, ContextFit, fit_context
from turnstate.core._path import PathStep
from turnstate.core._registry import ModelInfo, Registry
from turnstate.providers._protocol import ProviderCall, ProviderResponse
from turnstate.states._guards import TurnFacts
from turnstate.states._machine import STATE_BY_NAME as _STATE_BY_NAME
from turnstate.states._machine import TurnModel
from turnstate.states._table import CALL_STATES, TRANSITIONS, State, Trigger
from turnstate.storage._protocol import ChatRecord, TurnAbort, TurnCommit, TurnLease

DEFAULT_TOOL_ITERATION_LIMIT = 8

OVERFLOW_REASON = "context_overflow"
OVERFLOW_REPLAY_RATIO = 0.70
"""What a replay after ``context_overflow`` trims to, as a share of the model's window:
the top of the ``normal`` band, so the fresh cursor has room to grow for many turns
before the next trim, and the 4-characters-per-token estimate has margin below the
provider's own count."""

DEFAULT_CONTEXT = ContextSettings()
"""A turn's context settings when it gives none: one frozen value shared by every turn
(a factory built two objects per ``TurnInput``)."""

_NOTICES = {
    "provider_changed": "The provider changed, so the conversation is sent again in full.",
    "model_changed": "The model changed, so the conversation is sent again in full.",
    "system_prompt_changed": "The instructions changed, so the conversation is sent again.",
    "toolset_changed": "The available tools changed, so the conversation is sent again.",
    "cursor_expired": "The provider no longer holds this conversation; resending it in full.",
    "cursor_invalid": "The stored conversation cursor is unusable; resending in full.",
    "envelope_malformed": "The stored continuation state was unreadable; resending in full.",
    "context_overflow": "The conversation outgrew the model's context window; the oldest "
                        "turns are left out of what is sent (they stay in the chat).",
    "tool_result_cursor_loss": "The provider lost this conversation while tools ran; it is "
                               "sent again in full with the tool results kept (no tool runs "
                               "twice).",
}


_UUID4_CLEAR = ~(0xF000 << 64 | 0xC000 << 48)  # the version nibble, the variant bits
_UUID4_SET = 0x4000 << 64 | 0x8000 << 48  # version 4, variant RFC 4122


_RANDOM_IDS = 64
"""Turn ids drawn from one ``os.urandom`` call (a system call per id cost more than the
id's formatting)."""


_SPLIT = struct.Struct("16s" * _RANDOM_IDS).unpack
"""One read's bytes as its ids' 16 each, in one C call."""


class _RandomBytes:
    """``os.urandom`` read ``_RANDOM_IDS`` ids at a time; dropped in a forked child, so
    parent and child never hand out the same bytes.

    The ids' bytes are handed out by a tuple iterator, whose ``next`` is one C call: two
    threads never get the same bytes, wherever one is switched out (an offset read and
    written back in Python let two threads take one id's bytes). Two threads refilling
    at once each take from their own read; the one stored last serves the next ids."""

    __slots__ = ("chunks",)

    def __init__(self) -> None:
        self.chunks: Iterator[bytes] = iter(())

    def take16(self) -> bytes:
        chunk = next(self.chunks, None)
        if chunk is None:
            block = os.urandom(16 * _RANDOM_IDS)
            chunks = iter(_SPLIT(block))
            self.chunks = chunks
            chunk = next(chunks)
        return chunk

    def drop(self) -> None:
        self.chunks = iter(())


_random = _RandomBytes()
if hasattr(os, "register_at_fork"):  # pragma: no branch - POSIX
    os.register_at_fork(after_in_child=_random.drop)


def new_turn_id() -> str:
    """A random version-4 UUID as 32 hex digits, as ``uuid.uuid4().hex`` writes it,
    without building the ``UUID`` object (a third of the time), from ``os.urandom``
    bytes read for many ids at once."""
    value = int.from_bytes(_random.take16(), "big") & _UUID4_CLEAR | _UUID4_SET
    return f"{value:032x}"


_NO_USAGE = NO_STATS.usage
USAGE_MISSING = "usageMissing"
"""The audit metadata key of a turn with a response whose usage never came (a server
that ignores ``stream_options.include_usage``, a null ``usage``): its cost is None."""
CUT_REQUESTS = "cutRequests"
"""The audit metadata key counting the turn's requests whose stream was cut before their
response (``TurnRun.absorb_cuts``): their known figures are in the usage, their output
an estimate over what streamed."""
_CUT_IN_FLIGHT = frozenset({Trigger.STOPPED.value, Trigger.CANCELLED.value})
"""Aborts that cut the provider call in flight on the turn's own side: the answer keeps
the text streamed so far (what the user saw), and the call's unknown bill unprices the turn."""
_stats: Callable[[int, int, int, Usage, TurnCost | None, int], TurnStats] = \
    slot_maker(TurnStats)
_audit: Callable[[str, str, str, str, str, str | None, str | None, JsonObject | None],
                 AuditState] = slot_maker(AuditState)
_text_part: Callable[[str, str | None], TextPart] = slot_maker(TextPart)
_context: Callable[[str, str, str, str, int | None, datetime | None, bool, bool],
                   TurnContext] = slot_maker(TurnContext)
_CRITICAL = Severity.CRITICAL.value


def is_critical(context_state: str | None) -> bool:
    """Whether a stored ``last_context_state`` has the ``critical`` severity. One
    substring test per turn (issue 26), no JSON parse: the snapshot's only words are its
    severity and its source (``provider`` / ``estimate``), so the word in the stored text
    is the severity, however the store spaced the JSON."""
    return context_state is not None and _CRITICAL in context_state
_call: Callable[[Strategy, ModelInfo, str, Sequence[ToolSpec], ContextSettings,
                 GenerationSettings, Sequence[Message], str, Sequence[UserPart], str | None,
                 Sequence[ToolResultPart], Sequence[JsonObject], int, Sequence[Part],
                 CachePolicy, str], ProviderCall] = slot_maker(ProviderCall)
_commit: Callable[[Sequence[Part], ContinuationEnvelope | None, AuditState | None, Usage,
                   ContextSnapshot | None, str, Sequence[PathStep]], TurnCommit] = (
    slot_maker(TurnCommit))
"""A turn's records without attrs' ``__init__`` (``_frozen``; issue 26): converters
applied and validators run as ``__init__`` would."""

STRATEGY_OF = {state: Strategy(state.value) for state in CALL_STATES}
"""The strategy of each call state, by a dict lookup (an enum call costs more than a
microsecond on 3.11)."""


def fallback_message(reason: str) -> str:
    return _NOTICES.get(reason, "The conversation is sent again in full.")


_Item = TypeVar("_Item")


def _tools(value: Iterable[Tool]) -> tuple[Tool, ...]:
    return _sequence(value, "tools", "Tool objects")


def _content(value: Iterable[UserPart]) -> tuple[UserPart, ...]:
    return _sequence(value, "content", "TextPart, ImagePart or FilePart parts")


def _sequence(value: Iterable[_Item], field: str, items: str) -> tuple[_Item, ...]:
    """``value`` as a tuple; None or one item given bare is ``InvalidInput`` naming
    ``field`` (it was a ``TypeError`` from ``tuple``)."""
    try:
        return tuple(value)
    except TypeError:
        problem = f"must be a sequence of {items}, got {type(value).__name__}"
        raise InvalidInput(field, problem) from None


@attrs.frozen(kw_only=True)
class TurnInput:
    """One user turn, as a chat server asks for it.

    Attributes:
        provider: registry name of the provider to use.
        model: the model name.
        tools: tools the model may call (name, description, JSON-schema parameters,
            async handler, timeout).
        context: compaction and context settings for this request.
        tool_iteration_limit: the most tool iterations before the turn aborts.
        turn_id: an id for the turn (generated when None).
        owner: when given, the chat must belong to this owner: another owner's chat is
            ``ChatNotFound``, exactly as a missing one (checked by the store when the
            turn loads the chat and takes its lease).
        settings: how the model generates this turn's answer (``GenerationSettings``:
            output limit, sampling, reasoning effort or budget, tool choice, ...);
            checked against the registry before the lease, never part of the envelope.
        recover_tool_results: when the provider loses the cursor while tool results are
            in flight, replay the history with this turn's calls and results instead of
            aborting with ``tool_result_cursor_loss``. None takes the engine's default.
        content: the user's message as parts: ``TextPart``, ``ImagePart`` (an https URL
            or inline bytes with their media type) and ``FilePart`` (a PDF, inline or
            by URL), in order. Give either ``content`` or ``user_text``.
        user_text: the one-text shorthand (``content=(TextPart(text=...),)``); with
            ``content`` given, it reads as the content's text parts joined (so
            ``attrs.evolve`` of a turn with content keeps working).
        replace_from: an "edit and regenerate": the seq of a stored message that this
            turn's question replaces. The turn's begin deletes that message and every
            later one in the same write that takes the lease (``TurnStart.replace_from``),
            so a refused turn (``ChatBusy``, ``MessageNotFound``) deletes nothing and no
            other turn can take the chat in between. None: nothing is deleted.

    Raises:
        InvalidInput: both ``user_text`` (other than the content's text) and ``content``
            given, or neither; a part that is not a user part, a non-https URL, an
            unknown media type or empty data (the field names the part:
            ``content[1].url``); a ``replace_from`` that is not a positive ``int`` (a
            bool included). The inline-bytes bound, a message of nothing but whitespace
            (no image, no file) and the model's input types are checked by the engine,
            also before the lease.
    """

    provider: str
    model: str
    system_prompt: str
    content: tuple[UserPart, ...] = attrs.field(default=(), converter=_content)
    user_text: str = NOT_GIVEN
    tools: tuple[Tool, ...] = attrs.field(default=(), converter=_tools)
    context: ContextSettings = attrs.field(default=DEFAULT_CONTEXT)
    tool_iteration_limit: int = DEFAULT_TOOL_ITERATION_LIMIT
    turn_id: str | None = None
    owner: str | None = None
    recover_tool_results: bool | None = None
    settings: GenerationSettings = attrs.field(default=NO_SETTINGS)
    replace_from: int | None = None

    def __attrs_post_init__(self) -> None:
        given = self.user_text is not NOT_GIVEN
        problem = content_problem(self.content) or shorthand_problem(
            self.content, self.user_text if given else None)
        cut = self.replace_from
        if problem is None and cut is not None and (type(cut) is not int or cut < 1):
            problem = "replace_from", ("must be a positive whole number (a message's seq) "
                                       f"or None, got {cut!r}")
        if problem is not None:
            raise InvalidInput(*problem)
        if not given:  # frozen: set once, here, to the content's text
            object.__setattr__(self, "user_text", content_text(self.content))

    @property
    def user_parts(self) -> tuple[UserPart, ...]:
        """The user's message as parts: ``content``, or the one text part of
        ``user_text``."""
        return self.content or (_text_part(self.user_text, None),)  # text, phase

    def turn_context(self, committed_seq: int | None, now: datetime, *,
                     tools_digest: str | None = None,
                     context_state: str | None = None) -> TurnContext:
        """The context the continuation is decided in; ``tools_digest``: the toolset's
        digest when the caller took it already (``check_input`` does); ``context_state``:
        the chat's ``last_context_state`` as stored."""
        if tools_digest is None:
            tools_digest = toolset_hash([t.spec.as_mapping() for t in self.tools])
        # provider, model_name, system_prompt_hash, toolset_hash, committed_seq, now,
        # context_critical, provider_compaction
        return _context(self.provider, self.model, system_prompt_hash(self.system_prompt),
                        tools_digest, committed_seq, now, is_critical(context_state),
                        self.context.provider_compaction_enabled)


_FIRST_FACTS: dict[tuple[bool, bool, int], TurnFacts] = {}
_FIRST_FACTS_KEPT = 64


def first_facts(durable: bool, recover: bool, iteration_limit: int) -> TurnFacts:
    """A turn's facts as it starts, made once per (durable, recover, limit): frozen, so
    one value serves every turn that starts alike (attrs' frozen ``__init__`` of seven
    fields per turn cost more than the lookup; issue 26). A turn changes its facts by
    replacing them (``TurnRun.update_facts``), never in place."""
    if type(iteration_limit) is not int:  # kept exactly as given (8.0 is not 8 here)
        return TurnFacts(durable=durable, recover_tool_results=recover,
                         iteration_limit=iteration_limit)
    key = (durable, recover, iteration_limit)
    facts = _FIRST_FACTS.get(key)
    if facts is None:
        facts = TurnFacts(durable=durable, recover_tool_results=recover,
                          iteration_limit=iteration_limit)
        if len(_FIRST_FACTS) < _FIRST_FACTS_KEPT:
            _FIRST_FACTS[key] = facts
    return facts


class TurnRun:
    """Mutable per-turn working memory of the driver (never persisted as such)."""

    def __init__(self, *, chat: ChatRecord, turn: TurnInput, lease: TurnLease,
                 ctx: TurnContext, model: ModelInfo, durable: bool,
                 recover: bool = False, cache: CachePolicy = CachePolicy.AUTO) -> None:
        self.chat, self.turn, self.lease = chat, turn, lease
        self.cache = turn.context.cache or cache
        # The committed history, read by the driver when a replay or local loop first
        # needs it; a cursor turn leaves it None.
        self.history: tuple[Message, ...] | None = None
        self.ctx, self.model_info = ctx, model
        self.machine_model = TurnModel(first_facts(durable, recover, turn.tool_iteration_limit))
        self.strategy: Strategy | None = None
        self.degradation: str | None = None
        self.parts: list[Part] = []
        self.cursor: str | None = None
        self.loop: tuple[JsonObject, ...] = ()
        self.pending_results: tuple[ToolResultPart, ...] = ()
        self.last_call: ProviderCall | None = None
        self.last_response: ProviderResponse | None = None
        self.state: ContinuationEnvelope | None = None
        self.persisted: ContinuationEnvelope | None = None  # what the commit stores
        self.stats = NO_STATS
        self.abort_detail: str | None = None
        self.failure: ProviderFailure | None = None
        self.tools = {t.spec.name: t for t in turn.tools} if turn.tools else {}
        self.metadata: JsonObject = {}
        self.commit_task: asyncio.Future[ChatRecord] | None = None
        # The text the current provider call has streamed so far: kept by a stopped
        # turn's abort (what the user saw), dropped once the call's response is absorbed.
        self.streamed: list[str] = []
        self.in_flight = False  # a request sent whose response is not absorbed yet
        # Context fitting of replays and local loops (``fit_context``): the chat's learnt
        # provider tokens per estimated token, the window the provider said it enforces
        # (when below the registry's), the scaled estimate of the last request sent, and
        # how many oldest messages the turn has left out so far.
        self.scale = 1.0
        self.window: int | None = None
        self.sent_tokens = 0
        self.trimmed = 0
        self.refused = False  # the provider refused one of the turn's requests as too long

    @property
    def facts(self) -> TurnFacts:
        return self.machine_model.facts

    def update_facts(self, **changes: bool | int) -> None:
        self.machine_model.facts = attrs.evolve(self.machine_model.facts, **changes)  # type: ignore[arg-type]

    @property
    def current(self) -> State:
        # ``TurnModel.state`` without its own property call: the driver reads the state
        # a score of times per turn.
        return _STATE_BY_NAME[self.machine_model.machine_state]

    def transition_part(self, reason: str, source: State) -> TransitionPart:
        strategy = Strategy.REPLAY if self.facts.durable else Strategy.LOCAL_LOOP
        part = TransitionPart(reason=reason, strategy=strategy.value, source_state=source.value)
        self.parts.append(part)
        if self.degradation is None:
            self.degradation = reason
        return part

    def call_for(self, state: State) -> ProviderCall:
        strategy = STRATEGY_OF[state]
        iteration = self.facts.iterations_done
        # Replay after a tool iteration only happens when the turn recovers its in-flight
        # results: they go in the history's place, never as a cursor continuation.
        recovering = strategy is Strategy.REPLAY and iteration > 0
        turn, cursor = self.turn, strategy is Strategy.CURSOR
        # strategy, model, system_prompt, tools, settings, generation, history, user_text,
        # user_parts, cursor, tool_results, loop_messages, iteration, turn_parts, cache,
        # cache_key
        return _call(
            strategy, self.model_info, turn.system_prompt,
            [t.spec for t in turn.tools] if turn.tools else [],
            turn.context, turn.settings, () if cursor else self._loaded_history(),
            turn.user_text, turn.content, self.cursor if cursor else None,
            self.pending_results if iteration and not recovering else (),
            self.loop if strategy is Strategy.LOCAL_LOOP else (), iteration,
            tuple(self.parts) if recovering else (), self.cache,
            prompt_cache_key(self.lease.chat_id) if self.cache.enabled else "")

    def fit_context(self) -> ContextFit:
        """Check the replayed history against the model's context window before a replay
        or local-loop request (``turnstate.core._overflow``). When the request opted in
        to trimming and a trim makes it fit, ``history`` loses its oldest whole turns
        and the audit records the cut (``contextTrimmed``). Past a compaction point of
        this provider and model only what follows it counts, and nothing is trimmed.
        After ``context_overflow`` or a refusal as too long (no compaction point) the
        history is trimmed whatever the policy, to ``OVERFLOW_REPLAY_RATIO`` of the
        window, or to the whole window when the newest turn alone needs more."""
        history = self._loaded_history()
        other = (len(self.turn.system_prompt) + len(self.turn.user_text)
                 + media_chars(self.turn.content, self.turn.provider) + part_chars(self.parts)
                 + sum(len(json.dumps(t.spec.parameters)) for t in self.turn.tools))
        policy, checked = self.turn.context.overflow, history
        limit = self.model_info.context_limit
        if self.window is not None and self.window < limit:
            limit = self.window
        cut = history_from_compaction(history, self.turn.provider, self.turn.model)
        if cut is not None:
            head, checked = cut
            other += compaction_chars(head[:1]) + part_chars(head[1:])
            policy = OverflowPolicy.ABORT
        elif self.refused or self.overflowed():  # the window refused it: trim, with room
            policy = OverflowPolicy.TRIM
            fit = fit_context(checked, other_chars=other, policy=policy, scale=self.scale,
                              context_limit=math.floor(limit * OVERFLOW_REPLAY_RATIO))
            if fit.fits:
                return self._trimmed(history, fit)
        fit = fit_context(checked, other_chars=other, policy=policy, context_limit=limit,
                          scale=self.scale)
        return self._trimmed(history, fit)

    def _trimmed(self, history: tuple[Message, ...], fit: ContextFit) -> ContextFit:
        """Take ``fit``: the request's estimate, and its cut when it trims and fits."""
        self.sent_tokens = fit.estimated_tokens
        if fit.dropped and fit.fits:
            self.trimmed += fit.dropped
            trim: JsonObject = {**fit.audit(history), "droppedMessages": self.trimmed}
            if self.scale != 1.0:
                trim["tokenScale"] = round(self.scale, 3)
            self.metadata["contextTrimmed"] = trim
            self.history = history[fit.dropped:]
        return fit

    @property
    def calibration_key(self) -> CalibrationKey:
        return self.lease.chat_id, self.turn.provider, self.turn.model

    @property
    def calibration(self) -> Calibration:
        """What the turn learnt of the chat's tokens and window (``_steps._refused``)."""
        return Calibration(scale=self.scale, window=self.window)

    def recall(self, learnt: Calibration) -> None:
        """Take what the chat learnt before (a window said this turn, by a refused
        cursor, wins when smaller)."""
        self.scale = learnt.scale
        if learnt.window is not None and (self.window is None or learnt.window < self.window):
            self.window = learnt.window

    def may_retrim(self) -> bool:
        """A replay or local loop the provider refused as too long may be sent again
        trimmed more: the turn opted in to trimming, or replays after ``context_overflow``
        (table rule 10)."""
        return self.turn.context.overflow is OverflowPolicy.TRIM or self.overflowed()

    def overflowed(self) -> bool:
        """The turn degraded because the cursor's conversation outgrew the window
        (``context_overflow``, as the degradation or as the reason of a loss with tool
        results in flight). Read once per replay, never on a cursor turn."""
        return any(step.reason == OVERFLOW_REASON for step in self.machine_model.path)

    def _loaded_history(self) -> tuple[Message, ...]:
        if self.history is None:  # pragma: no cover - the driver loads it before the call
            msg = "a replay call needs the history, which was not loaded"
            raise RuntimeError(msg)
        return self.history

    def count_request(self, size: int) -> None:
        stats = self.stats  # built directly: attrs.evolve costs several times more
        # requests, request_bytes, tool_calls, usage, cost
        self.stats = _stats(stats.requests + 1, stats.request_bytes + size, stats.tool_calls,
                            stats.usage, stats.cost, stats.retries)
        self.in_flight = True

    def count_retries(self, sent: int) -> None:
        """One call sent ``sent`` HTTP requests (its ``AttemptBudget``): those beyond
        the first are retries (``TurnStats.retries``)."""
        if sent > 1:
            stats = self.stats
            self.stats = _stats(stats.requests, stats.request_bytes, stats.tool_calls,
                                stats.usage, stats.cost, stats.retries + sent - 1)

    def absorb(self, response: ProviderResponse,
               calls: tuple[ToolCallPart, ...] | None = None) -> None:
        """Take ``response`` into the turn; ``calls``: its tool calls when the caller
        has them already (``ProviderResponse.tool_calls`` scans the parts each read)."""
        if calls is None:
            calls = response.tool_calls
        self.streamed.clear()
        self.in_flight = False
        self.parts.extend(response.parts)
        self.last_response = response
        self.metadata.update(response.metadata)
        stats = self.stats
        # The first response's usage is the turn's so far: adding it to the zero usage
        # gives an equal value, built for nothing (issue 26).
        usage = response.usage if stats.usage is _NO_USAGE else stats.usage + response.usage
        # Each request is priced alone (a price tier is a request's), then added up.
        price, ttl = self.model_info.price, self.cache.ttl
        cost = add_cost(stats.cost, response.usage, price, ttl=ttl)
        apart = response.billed_apart
        if apart is not None:  # billed, but not the context's usage
            usage += apart
            cost = add_cost(cost, apart, price, ttl=ttl)
        if response.usage.input_tokens <= 0:  # every request reads input: none reported
            self.metadata[USAGE_MISSING] = True
        if USAGE_MISSING in self.metadata or _unpriced(self.metadata):
            cost = None  # part of the bill is unknown, or not at list price: no cost, not $0
        self.stats = _stats(stats.requests, stats.request_bytes, stats.tool_calls + len(calls),
                            usage, cost, stats.retries)
        if self.facts.durable:
            self.cursor = response.response_id

    def absorb_cuts(self, cuts: Sequence[Usage | None]) -> None:
        """Requests the provider answered but whose stream was cut before the response
        (``provider_batches``' ``cuts``: a connection lost, a timeout, a malformed frame,
        a stop, a lost lease, a restart's first try): billed all the same. What a cut
        request's stream said (Anthropic's ``message_start`` input and cache counts, its
        output estimated over what streamed) joins the turn's usage and cost; one that
        said nothing (OpenAI's ``response.created``, Gemini's ``interaction.created``, a
        Chat Completions chunk) leaves the turn without a cost (``USAGE_MISSING``), as a
        response without usage does, never the $0 of nothing known."""
        if not cuts:
            return
        self.in_flight = False  # the cut request is billed here, not unknown (``_cut_call``)
        stats = self.stats
        usage, cost = stats.usage, stats.cost
        price, ttl = self.model_info.price, self.cache.ttl
        for billed in cuts:
            if billed is None or billed.input_tokens <= 0:
                self.metadata[USAGE_MISSING] = True
                continue
            usage = billed if usage is _NO_USAGE else usage + billed
            cost = add_cost(cost, billed, price, ttl=ttl)
        counted = self.metadata.get(CUT_REQUESTS)
        self.metadata[CUT_REQUESTS] = (counted if type(counted) is int else 0) + len(cuts)
        if USAGE_MISSING in self.metadata or _unpriced(self.metadata):
            cost = None
        self.stats = _stats(stats.requests, stats.request_bytes, stats.tool_calls, usage, cost,
                            stats.retries)

    def drop_cursor(self, dropped: list[JsonObject]) -> None:
        """A length stop dropped these whole calls (listed in the audit after any the
        parser dropped): a durable cursor would stand for calls without outputs, so the
        turn commits none (the next turn replays)."""
        listed = self.metadata.get("droppedToolCalls")
        self.metadata["droppedToolCalls"] = [*(listed if isinstance(listed, list) else ()),
                                             *dropped]
        if self.facts.durable:
            self.state = None

    def finish(self) -> tuple[str, str | None]:
        """The completed turn's finish reason (``FINISH_REASONS``) and the provider's own."""
        last = self.last_response
        if last is None:
            return "stop", None
        return user_finish_reason(last.finish_reason), last.raw_finish_reason

    def final_text(self) -> str:
        """The text after the last tool result: what the user reads as the answer."""
        return text_after_tools(self.parts)

    def snapshot(self, registry: Registry) -> ContextSnapshot:
        reported = self.last_response.usage.input_tokens if self.last_response else None
        # Gemini's cursor usage leaves out the conversation it holds (core._context).
        cursor = self.strategy is Strategy.CURSOR
        partial = reports_partial_input(self.turn.provider, cursor)
        dropped = chain_dropped_chars(
            self.turn.provider, cursor=cursor, previous_state=self.chat.last_context_state,
            history_chars=self.chat.history_chars,
            trimmed_history=self.history if self.trimmed else None)
        if reported is not None and reported > 0 and not partial:  # no estimate needed
            return context_snapshot(provider=self.turn.provider, model=self.turn.model,
                                    reported_input_tokens=reported, estimated_tokens=0,
                                    registry=registry, dropped_history_chars=dropped)
        # The history's characters come from the chat row, kept by the store (the same
        # estimate as counting the history's texts, without reading them), or, past a
        # compaction point of this provider and model, from that point on.
        chars, parts, user = context_chars(
            self.parts, history=self.history,
            history_chars=max(0, self.chat.history_chars - dropped),
            provider=self.turn.provider, model=self.turn.model)
        # The user's images and files, by the provider's own rule (history: the neutral one).
        media = media_chars(self.turn.content, self.turn.provider) if user else 0
        return context_snapshot(
            provider=self.turn.provider, model=self.turn.model,
            reported_input_tokens=reported, partial=partial, dropped_history_chars=dropped,
            estimated_tokens=estimate_tokens(self.turn.system_prompt,
                                             self.turn.user_text if user else "",
                                             part_texts(parts),
                                             [json.dumps(t.spec.parameters)
                                              for t in self.turn.tools],
                                             chars=chars + media),
            registry=registry,
        )

    def commit_record(self, snapshot: ContextSnapshot) -> TurnCommit:
        self.persisted = persisted = decide_turn_persistence(self.state)
        # provider, model_name, strategy, system_prompt_hash, toolset_hash, cursor,
        # reason, metadata
        audit = _audit(self.turn.provider, self.turn.model,
                       (self.strategy or Strategy.REPLAY)._value_, self.ctx.system_prompt_hash,
                       self.ctx.toolset_hash, persisted.cursor if persisted else None,
                       self.degradation, self.audit_metadata())
        # parts, provider_state, audit, usage, context, strategy, path
        return _commit(self.parts, persisted, audit, self.stats.usage, snapshot,
                       audit.strategy, completed_path(self.machine_model, Trigger.COMMITTED))

    def audit_metadata(self) -> JsonObject:
        """The responses' metadata, how many opaque parts of each kind the turn kept, and
        what it sent (``sent``: provider requests and their bytes, as in ``TurnStats``)."""
        # Set key by key on a copy of the responses' metadata (no dict made per group and
        # merged): a key the metadata has keeps its place and takes the new value, as in
        # ``{**metadata, "sent": ...}`` (tested).
        metadata = dict(self.metadata)
        opaque = opaque_counts(self.parts)
        if opaque:
            metadata["opaqueParts"] = opaque
        stats = self.stats
        metadata["sent"] = _sent(stats)
        if stats.cost is not None:
            metadata["costUsd"] = stats.cost.as_json()
        if not self.model_info.known:
            metadata["modelKnown"] = False
        finish, raw = self.finish()
        metadata["finishReason"] = finish
        if raw:
            metadata["finishReasonRaw"] = raw
        return metadata

    def abort_record(self, reason: str) -> TurnAbort:
        parts = tuple(self.parts)
        if reason in _CUT_IN_FLIGHT and self.streamed:  # what the user saw
            parts += (TextPart(text="".join(self.streamed)),)
        if reason in _CUT_IN_FLIGHT and self.in_flight:
            self._cut_call()
        usage, audit = self.billed_record()
        return TurnAbort(reason=reason, parts=parts,
                         strategy=self.strategy.value if self.strategy else None,
                         path=completed_path(self.machine_model, Trigger.ABORT_RECORDED),
                         detail=self.abort_detail, usage=usage, audit=audit)

    def _cut_call(self) -> None:
        """A request cut in flight by a stop or a cancel: the provider bills what it read
        and wrote of it, which turnstate never learns, so the turn's cost is unknown (None,
        not the answered requests' alone) and its audit says so (``usageMissing``)."""
        self.in_flight = False
        self.metadata[USAGE_MISSING] = True
        stats = self.stats
        self.stats = _stats(stats.requests, stats.request_bytes, stats.tool_calls,
                            stats.usage, None, stats.retries)

    def billed_record(self) -> tuple[Usage | None, AuditState | None]:
        """What an aborted turn's answered requests billed, and its audit record (no
        cursor; metadata: what it sent, its cost), for its aborted answer; two Nones when
        no request was answered (nothing billed that turnstate knows of)."""
        stats = self.stats
        unknown = USAGE_MISSING in self.metadata  # billed, for figures nobody sent
        if stats.usage is _NO_USAGE and not unknown:
            return None, None
        metadata: JsonObject = {"sent": _sent(stats)}
        if stats.cost is not None:
            metadata["costUsd"] = stats.cost.as_json()
        for key in (USAGE_MISSING, CUT_REQUESTS, *UNPRICED_KEYS):
            if key in self.metadata:
                metadata[key] = self.metadata[key]
        audit = _audit(self.turn.provider, self.turn.model,
                       (self.strategy or Strategy.REPLAY)._value_, self.ctx.system_prompt_hash,
                       self.ctx.toolset_hash, None, self.degradation, metadata)
        return None if stats.usage is _NO_USAGE else stats.usage, audit


def _sent(stats: TurnStats) -> JsonObject:
    """The audit's ``sent``: ``retries`` only when there were (absent reads as 0, as in
    the records written before it was counted)."""
    sent: JsonObject = {"requests": stats.requests, "requestBytes": stats.request_bytes}
    if stats.retries:
        sent["retries"] = stats.retries
    return sent


def _unpriced(metadata: JsonObject) -> bool:
    """A response billed beyond its tokens' list price (another service tier, calls of
    the provider's own tools): ``UNPRICED_KEYS``."""
    return any(key in metadata for key in UNPRICED_KEYS)


def text_after_tools(parts: Iterable[Part]) -> str:
    """The text after the last tool result of ``parts``."""
    text: list[str] = []
    for part in parts:
        if isinstance(part, ToolResultPart):
            text = []
        elif isinstance(part, TextPart):
            text.append(part.text)
    return "".join(text)


_FINAL_STEPS: dict[tuple[str, str], PathStep] = {}
for _edge in TRANSITIONS:  # the first edge of each (source, trigger), as the table reads
    _FINAL_STEPS.setdefault((_edge.source.value, _edge.trigger.value), PathStep(
        source=_edge.source.value, trigger=_edge.trigger.value, dest=_edge.dest.value))


def completed_path(model: TurnModel, final: Trigger) -> tuple[PathStep, ...]:
    """The path so far plus the final edge ``final`` from the current state (a frozen
    step made once per edge when the module loads, not a scan of the table per turn)."""
    return (*model.path, _FINAL_STEPS[model.machine_state, final.value])
