"""The working memory of one running turn, and the pure helpers the driver uses.

``TurnRun`` is the driver's scratchpad for one turn: what the turn was asked, what the
provider said so far, the current provider state, the tool results in flight. It is
deliberately not persisted anywhere: durable state reaches the store only through
``TurnCommit`` (and ``decide_turn_persistence``). Its billing half is ``_run_bill``'s
``TurnBill``, its context fitting ``_run_fit``'s ``TurnFit`` (mixins).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

import attrs

from turnstate.core._citations import Citation
from turnstate.core._compaction import context_chars
from turnstate.core._context import (
    PARTIAL_CURSOR_USAGE,
    ContextSettings,
    ContextSnapshot,
    chain_dropped_chars,
    context_snapshot,
    estimate_tokens,
    part_texts,
    reports_partial_input,
)
from turnstate.core._conversation import (
    AuditState,
    Message,
    Part,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    TransitionPart,
    Usage,
    UserPart,
    citations_after_tools,
    opaque_counts,
)
from turnstate.core._cost import CachePolicy, adaptive_policy
from turnstate.core._decisions import (
    Strategy,
    TurnContext,
    decide_turn_persistence,
)
from turnstate.core._envelope import ContinuationEnvelope
from turnstate.core._events import NO_STATS, ProviderFailure, user_finish_reason
from turnstate.core._frozen import slot_maker
from turnstate.core._generation import GenerationSettings, after_tool_results
from turnstate.core._hashing import prompt_cache_key
from turnstate.core._json import JsonObject
from turnstate.core._path import PathStep
from turnstate.core._registry import ModelInfo, Registry
from turnstate.core._turn_metadata import merge_metadata
from turnstate.engine._run_bill import (
    _NO_USAGE,
    USAGE_MISSING,
    TurnBill,
    _audit,
    _sent,
    _stats,
    _unpriced,
)
from turnstate.engine._run_fit import TurnFit
from turnstate.engine._tools import ToolTime
from turnstate.engine._turn_input import (
    TurnInput,
)
from turnstate.engine._user_media import TurnQuestion, UserMedia, lean_turn
from turnstate.providers._boundary import cited_now
from turnstate.providers._protocol import ProviderCall, ProviderResponse
from turnstate.states._guards import TurnFacts
from turnstate.states._machine import STATE_BY_NAME as _STATE_BY_NAME
from turnstate.states._machine import TurnModel
from turnstate.states._table import CALL_STATES, TRANSITIONS, State, Trigger
from turnstate.storage._protocol import ChatRecord, TurnAbort, TurnCommit, TurnLease

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


_call: Callable[[Strategy, ModelInfo, str, Sequence[ToolSpec], ContextSettings,
                 GenerationSettings, Sequence[Message], str, Sequence[UserPart], str | None,
                 Sequence[ToolResultPart], Sequence[JsonObject], int, Sequence[Part],
                 CachePolicy, str], ProviderCall] = slot_maker(ProviderCall)
_commit: Callable[[Sequence[Part], ContinuationEnvelope | None, AuditState | None, Usage,
                   ContextSnapshot | None, str, Sequence[PathStep]], TurnCommit] = (
    slot_maker(TurnCommit))
"""A turn's records without attrs' ``__init__`` (``_frozen``; issue 26): converters
applied and validators run as ``__init__`` would."""

_CUT_IN_FLIGHT = frozenset({Trigger.STOPPED.value, Trigger.CANCELLED.value,
                            Trigger.DEADLINE_EXCEEDED.value})
"""Aborts that cut the provider call in flight on the turn's own side: the answer keeps
the text streamed so far (what the user saw), and the call's unknown bill unprices the turn."""
STRATEGY_OF = {state: Strategy(state.value) for state in CALL_STATES}
"""The strategy of each call state, by a dict lookup (an enum call costs more than a
microsecond on 3.11)."""


def fallback_message(reason: str) -> str:
    return _NOTICES.get(reason, "The conversation is sent again in full.")


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


class TurnRun(TurnFit, TurnBill, TurnQuestion):
    """Mutable per-turn working memory of the driver (never persisted as such)."""

    def __init__(self, *, chat: ChatRecord, turn: TurnInput, lease: TurnLease,
                 ctx: TurnContext, model: ModelInfo, durable: bool,
                 recover: bool = False, cache: CachePolicy = CachePolicy.AUTO) -> None:
        # The question's parts apart, so its decoded media can go between requests
        # (``_user_media``); the turn itself keeps none of them.
        self.media = UserMedia(turn.content, turn.provider)
        turn = lean_turn(turn)
        self.chat, self.turn, self.lease = chat, turn, lease
        self.cache = turn.context.cache or cache
        # The lifetime the turn's requests ask for, which prices writes whose lifetime
        # the usage does not split (``adaptive`` sets it per request: ``call_for``).
        self.cache_ttl = self.cache.ttl
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
        self.tool_times: list[ToolTime] = []  # the tool iteration's calls (``_tracing``)
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
        # Its parser's citations, when a stop cut it (``provider_batches``; wire7).
        self.cited: list[Callable[[], tuple[Citation, ...]]] = []
        self.in_flight = False  # a request sent whose response is not absorbed yet
        self.sent_at: datetime | None = None  # when the current call was sent
        # Context fitting of replays and local loops (``fit_context``): the chat's learnt
        # provider tokens per estimated token, the window the provider said it enforces
        # (when below the registry's), the scaled estimate of the last request sent, and
        # how many oldest messages the turn has left out so far.
        self.scale = 1.0
        self.window: int | None = None
        self.sent_tokens = 0
        self.trimmed = 0
        self.refused = False  # the provider refused one of the turn's requests as too long
        self.expires = float("inf")  # the turn's deadline, loop time (``LeaseKeeper``)

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
        cache = self.cache
        if cache is CachePolicy.ADAPTIVE:  # resolved from the chat's pace (no IO)
            cache = adaptive_policy(() if cursor else self._loaded_history(), self.ctx.now)
            self.cache_ttl = cache.ttl
        # strategy, model, system_prompt, tools, settings, generation, history, user_text,
        # user_parts, cursor, tool_results, loop_messages, iteration, turn_parts, cache,
        # cache_key
        self.last_call = call = _call(
            strategy, self.model_info, turn.system_prompt,
            [t.spec for t in turn.tools] if turn.tools else [],
            turn.context, after_tool_results(turn.settings) if iteration else turn.settings,
            () if cursor else self._loaded_history(),
            turn.user_text, self.question(strategy, iteration), self.cursor if cursor else None,
            self.pending_results if iteration and not recovering else (),
            self.loop if strategy is Strategy.LOCAL_LOOP else (), iteration,
            tuple(self.parts) if recovering else (), cache,
            prompt_cache_key(self.lease.chat_id) if cache.enabled else "")
        return call

    def absorb(self, response: ProviderResponse,
               calls: tuple[ToolCallPart, ...] | None = None, *,
               started: datetime | None = None) -> None:
        """Take ``response`` into the turn; ``calls``: its tool calls when the caller
        has them already (``ProviderResponse.tool_calls`` scans the parts each read);
        ``started``: when its HTTP request was sent, if the transport said
        (``request_start``)."""
        if calls is None:
            calls = response.tool_calls
        self.streamed.clear()
        self.in_flight = False
        self.parts.extend(response.parts)
        self.last_response = response
        if response.metadata:  # counts summed over the turn's requests, lists joined
            merge_metadata(self.metadata, response.metadata)
        stats = self.stats
        # The first response's usage is the turn's so far: adding it to the zero usage
        # gives an equal value, built for nothing (issue 26).
        usage = response.usage if stats.usage is _NO_USAGE else stats.usage + response.usage
        # Each request is priced alone (a price tier and an hour are a request's), then
        # added up.
        cost = self._priced(stats.cost, stats.usage, response.usage, started)
        apart = response.billed_apart
        if apart is not None:  # billed, but not the context's usage
            cost = self._priced(cost, usage, apart, started)
            usage += apart
        if response.usage.input_tokens <= 0:  # every request reads input: none reported
            self.metadata[USAGE_MISSING] = True
        if USAGE_MISSING in self.metadata or _unpriced(self.metadata):
            cost = None  # part of the bill is unknown, or not at list price: no cost, not $0
        self.stats = _stats(stats.requests, stats.request_bytes, stats.tool_calls + len(calls),
                            usage, cost, stats.retries)
        if self.facts.durable:
            self.cursor = response.response_id

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

    def final_citations(self) -> tuple[Citation, ...]:
        """The sources that answer cites (``TurnCompleted.citations``)."""
        return citations_after_tools(self.parts)

    def snapshot(self, registry: Registry) -> ContextSnapshot:
        reported = self.last_response.usage.input_tokens if self.last_response else None
        # Gemini's cursor usage leaves out the conversation it holds (core._context).
        cursor = self.strategy is Strategy.CURSOR
        partial, dropped = False, 0
        if self.turn.provider in PARTIAL_CURSOR_USAGE:  # else one set lookup (issue 26)
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
        media = self.media.chars if user else 0
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
            parts += (TextPart(text="".join(self.streamed), citations=cited_now(self.cited)),)
        if reason in _CUT_IN_FLIGHT and self.in_flight:
            self._cut_call()
        usage, audit = self.billed_record()
        return TurnAbort(reason=reason, parts=parts,
                         strategy=self.strategy.value if self.strategy else None,
                         path=completed_path(self.machine_model, Trigger.ABORT_RECORDED),
                         detail=self.abort_detail, usage=usage, audit=audit)

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
