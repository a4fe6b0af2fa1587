"""The states' actions: what a turn does in each working state, as async step streams.

Each action yields events for the consumer and ends with one ``Fire`` (the trigger the
driver fires next); a degradation also yields its ``Transition``, the write the driver
makes for it. Actions do the turn's IO (provider calls, tools, the history read) with
the collaborators of ``TurnServices``; the machine's guards and callbacks stay pure. The
actions know nothing of leases, exits or cancellation: ``_lifecycle`` owns those, calls
one action per state and decides what an exception out of an action means.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from datetime import datetime
from typing import Protocol

from turnstate.core._conversation import ToolCallPart, TransitionPart, Usage
from turnstate.core._decisions import (
    DegradationReason,
    Strategy,
    clears_stored_state,
    decide_continuation,
)
from turnstate.core._errors import (
    ConfigurationError,
    ContextLengthExceeded,
    CursorRejected,
    ProviderError,
)
from turnstate.core._events import (
    ContinuationDegraded,
    FallbackNotice,
    ImageOutputEvent,
    ReasoningDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnAborted,
    TurnEvent,
    text_delta_event,
    turn_completed,
)
from turnstate.core._overflow import (
    ContextCalibrations,
    measured_scale,
    recalibrate,
    sane_window,
)
from turnstate.core._registry import Registry
from turnstate.engine._histories import HistoryCache
from turnstate.engine._limits import ResponseBudget, TurnLimits, tool_result_chars
from turnstate.engine._outcome import cut_at_length, failure_of
from turnstate.engine._run import TurnRun, fallback_message
from turnstate.engine._step_values import FIRED, Action, Fire, Step, Transition
from turnstate.engine._tools import run_tools
from turnstate.providers._boundary import billed_usage, guarded, provider_batches
from turnstate.providers._protocol import (
    AttemptBudget,
    ImageOutput,
    ProviderAdapter,
    ProviderEvent,
    ProviderResponse,
    TextDelta,
    Transport,
)
from turnstate.states._guards import MAX_RETRIMS
from turnstate.states._table import State, Trigger
from turnstate.storage._protocol import Store, TurnCommit

logger = logging.getLogger("turnstate")


class TurnServices(Protocol):
    """The collaborators the actions use: ``TurnEngine`` provides them (read per use, so
    an engine's settings changed between turns apply to the next one)."""

    store: Store
    adapters: dict[str, ProviderAdapter]
    transport: Transport
    registry: Registry
    limits: TurnLimits
    clock: Callable[[], datetime]
    calibrations: ContextCalibrations
    histories: HistoryCache


class TurnSteps:
    """The action of every working state, over the engine's collaborators."""

    __slots__ = ("services",)

    def __init__(self, services: TurnServices) -> None:
        self.services = services

    def adapter_for(self, provider: str) -> ProviderAdapter:
        try:
            return self.services.adapters[provider]
        except KeyError:
            msg = f"no adapter configured for provider {provider!r}"
            raise ConfigurationError(msg) from None

    def validate(self, run: TurnRun) -> Action:
        """The continuation decided; a degradation's steps as a generator (it writes)."""
        decision = decide_continuation(run.chat.last_provider_state, run.ctx,
                                       self.services.registry)
        if decision.envelope is not None and decision.reason is None:
            run.cursor = decision.envelope.cursor
        if decision.reason is not None:
            return self._degrading(run, decision.reason.value)
        if decision.strategy is Strategy.CURSOR:
            return (), FIRED[Trigger.CONTINUE_WITH_CURSOR]
        return (), FIRED[Trigger.NO_STORED_STATE]

    async def _degrading(self, run: TurnRun, reason: str) -> AsyncGenerator[Step, None]:
        for step in self._degrade(run, reason, State.VALIDATE):
            yield step
        yield Fire(Trigger(reason), reason)

    @staticmethod
    def _degrade(run: TurnRun, reason: str, source: State) -> tuple[Step, ...]:
        """A degradation's events and its write, in that order."""
        part = run.transition_part(reason, source)
        logger.warning("[continuation][degraded] chat=%s turn=%s reason=%s strategy=%s from=%s",
                       run.lease.chat_id, run.lease.turn_id, reason, part.strategy, source)
        return (ContinuationDegraded(reason=reason, strategy=part.strategy,
                                     source_state=source.value),
                FallbackNotice(reason=reason, message=fallback_message(reason)),
                Transition(part, clear_provider_state=clears_stored_state(reason),
                           count=sum(isinstance(p, TransitionPart) for p in run.parts)))

    async def call(self, run: TurnRun) -> AsyncGenerator[Step, None]:
        adapter = self.adapter_for(run.turn.provider)
        await run.question_ready(self.services.store)  # its media read back, if let go
        if run.current is not State.CURSOR and run.history is None:
            # Once per turn: the committed history (the running turn is not in it).
            run.history = await self.services.histories.load(self.services.store, run.chat)
            run.recall(self.services.calibrations.get(run.calibration_key))
        if run.current is not State.CURSOR and not (fit := run.fit_context()).fits:
            run.abort_detail = fit.detail()
            yield Fire(Trigger.CONTEXT_OVERFLOW, Trigger.CONTEXT_OVERFLOW.value)
            return
        response: ProviderResponse | None = None
        calls: tuple[ToolCallPart, ...] = ()  # the response's, read once
        # the call's HTTP requests (``TurnStats.retries``) and when each was sent; its
        # retries wait no later than the turn's deadline
        tries = AttemptBudget(self.services.clock, run.expires)
        try:
            # ``call_for`` keeps the call as ``run.last_call``; no local holds its media
            request = guarded(adapter.provider, adapter.build_request,
                              run.call_for(run.current), doing="build the request")
            run.built(self.services.store)  # the body holds the media: the bytes go
            # When the call was sent: what a price by the hour reads (``ModelPrice.at``)
            # when the transport records no start of its own (``AttemptBudget.started``).
            run.count_request(len(request.body), self.services.clock())
            budget = ResponseBudget(adapter.provider, self.services.limits)
            cuts: list[Usage | None] = []  # requests cut mid-answer: billed all the same
            stream = provider_batches(self.services.transport, adapter, request, cuts, tries,
                                      cited=run.cited,
                                      max_tool_calls=self.services.limits.max_tool_calls)
            try:  # a resumption per chunk, not per event; closed as ``aclosing`` would
                async for item in stream:
                    if not isinstance(item, list):
                        calls = _taken_calls(item, budget, cuts)
                        response = item
                        continue
                    events, failure = _delta_events(run, item, budget)
                    if events:
                        yield events
                    if failure is not None:
                        raise failure
            finally:
                await _closed(stream, run, cuts, tries)
        except ProviderError as exc:
            async with aclosing(self._call_failed(run, exc, tries)) as steps:
                async for step in steps:
                    yield step
            return
        assert response is not None  # provider_batches always ends with a response
        if run.scale != 1.0 and run.current is not State.CURSOR:
            self._measured(run, response.usage.input_tokens)
        response, dropped = cut_at_length(response, calls)
        if dropped:
            calls = ()  # a length stop drops every call
        run.absorb(response, calls, started=tries.started)
        run.state = adapter.envelope(run.ctx, response, loop_messages=run.loop,
                                     now=self.services.clock(), covers_seq=run.lease.assistant_seq)
        if dropped:
            run.drop_cursor(dropped)
        yield FIRED[Trigger.TOOL_CALLS if calls else Trigger.COMPLETED]

    async def _cursor_lost(
        self, run: TurnRun, exc: ProviderError, reason: str
    ) -> AsyncGenerator[Step, None]:
        if run.current is not State.CURSOR:
            yield _failed(run, exc, reason)
        elif run.facts.tool_results_in_flight:
            async with aclosing(self._results_in_flight_lost(run, exc, reason)) as steps:
                async for step in steps:
                    yield step
        else:
            for step in self._degrade(run, reason, State.CURSOR):
                yield step
            yield Fire(Trigger(reason), reason)

    async def _call_failed(self, run: TurnRun, exc: ProviderError, tries: AttemptBudget
                           ) -> AsyncGenerator[Step, None]:
        """A failed call's steps: past the turn's deadline when its retry would have
        waited past it, a refusal as too long out of a replay or local loop
        (``_refused``), a lost cursor (``_cursor_lost``), else the provider's failure."""
        if tries.past_deadline:
            yield _past_deadline(run, exc)
        elif isinstance(exc, ContextLengthExceeded) and run.current is not State.CURSOR:
            # the refit counts the question's media, and a retrim sends them again
            await run.question_ready(self.services.store)
            yield self._refused(run, exc)
        elif isinstance(exc, CursorRejected | ContextLengthExceeded):
            said = (sane_window(exc.context_limit, run.model_info.context_limit)
                    if isinstance(exc, ContextLengthExceeded) else None)
            if said is not None:
                run.window = said  # the trimmed replay fits the provider's
            async with aclosing(self._cursor_lost(run, exc, _loss_reason(exc))) as steps:
                async for step in steps:
                    yield step
        else:
            yield _failed(run, exc, exc.code or type(exc).__name__)

    def _refused(self, run: TurnRun, exc: ContextLengthExceeded) -> Fire:
        """The provider refused a replay or local-loop request as longer than the window:
        learn the chat's scale from the refusal and send it again trimmed more when the
        turn may trim and a trim helps (``context_refused``, table rule 10), else abort
        ``context_overflow`` naming the provider's figures."""
        said = sane_window(exc.context_limit, run.model_info.context_limit)
        window = said or run.window or run.model_info.context_limit
        if said is not None:  # the provider's latest word replaces what was learnt before
            run.window = said
        run.scale = recalibrate(run.scale, run.sent_tokens, refused_tokens=exc.input_tokens,
                                window=window)
        self.services.calibrations.learn(run.calibration_key, run.calibration)
        detail = str(exc)  # the provider's words: its figures, when it gives them
        if run.may_retrim() and run.machine_model.destination(Trigger.CONTEXT_REFUSED):
            run.refused = True  # the refit (and the request sent again) keeps 30% room
            fit = run.fit_context()
            if fit.fits and fit.dropped:
                logger.warning("[context][retrim] chat=%s turn=%s %s; sending it again "
                               "without %d more messages", run.lease.chat_id,
                               run.lease.turn_id, detail, fit.dropped)
                return Fire(Trigger.CONTEXT_REFUSED, OVERFLOW)
            if fit.fits:  # nothing more to leave out
                detail += "; no older turn is left to leave out"
            else:
                detail += (f"; even without its {run.trimmed + fit.dropped:,} oldest messages "
                           f"it needs about {fit.estimated_tokens:,} tokens by the provider's "
                           f"count as learnt, over the window of {fit.context_limit:,}")
        elif run.may_retrim():
            detail += f"; the turn's {MAX_RETRIMS} trims are spent"
        run.abort_detail = detail
        run.failure = failure_of(exc)
        return Fire(Trigger.CONTEXT_OVERFLOW, OVERFLOW)

    def _measured(self, run: TurnRun, reported: int) -> None:
        """A chat with a learnt scale: the answered request's reported input tokens
        refine it (it falls back towards 1 when the text became plainer)."""
        run.scale = measured_scale(run.scale, run.sent_tokens, reported)
        self.services.calibrations.learn(run.calibration_key, run.calibration)

    async def _results_in_flight_lost(
        self, run: TurnRun, exc: ProviderError, reason: str
    ) -> AsyncGenerator[Step, None]:
        """The cursor died with tool results in flight: recover them by replay when the
        table allows it (opted in, retry unused), else abort as the default."""
        loss = Trigger.TOOL_RESULT_CURSOR_LOSS
        if run.machine_model.destination(loss) is State.REPLAY:
            for step in self._degrade(run, loss.value, State.CURSOR):
                yield step
        else:
            run.abort_detail = str(exc)
            run.failure = failure_of(exc)
            logger.warning("[continuation][degraded] chat=%s turn=%s reason=%s: tool results "
                           "in flight, aborting", run.lease.chat_id, run.lease.turn_id, reason)
        yield Fire(loss, reason)

    async def tools(self, run: TurnRun) -> AsyncGenerator[Step, None]:
        run.tool_times = []  # this iteration's calls, as they end (the trace's spans)
        facts = run.facts
        if facts.iterations_done >= facts.iteration_limit:
            run.abort_detail = f"more than {facts.iteration_limit} tool iterations"
            yield FIRED[Trigger.TOOL_ITERATION_LIMIT]
            return
        assert run.last_response is not None and run.last_call is not None
        calls = run.last_response.tool_calls
        iteration = facts.iterations_done + 1
        for call in calls:
            yield ToolCallEvent(call_id=call.call_id, name=call.name,
                                arguments=call.arguments, iteration=iteration)
        limits = self.services.limits
        results = await run_tools(calls, run.tools, limits.max_concurrent_tools,
                                  max_chars=tool_result_chars(limits, run.model_info),
                                  times=run.tool_times)
        # The results are the answer's before their events go out: a stop or a cancel at
        # one of these yields records every call with the result it had (embed6).
        run.parts.extend(results)
        for result in results:
            yield ToolResultEvent(call_id=result.call_id, name=result.name,
                                  output=result.output, is_error=result.is_error,
                                  iteration=iteration)
        run.pending_results = tuple(results)
        adapter = self.adapter_for(run.turn.provider)
        run.loop = adapter.extend_loop(run.last_call, run.last_response, results)
        run.update_facts(iterations_done=iteration, tool_results_in_flight=True)
        yield FIRED[Trigger.TOOLS_DONE]

    def commit(self, run: TurnRun) -> TurnCommit:
        """What the turn's commit writes (the lifecycle sends it and owns its outcome)."""
        return run.commit_record(run.snapshot(self.services.registry))


def final_event(run: TurnRun) -> TurnEvent:
    """The turn's last event: ``turn_completed`` or ``turn_aborted``."""
    path = tuple(run.machine_model.path)
    if run.current is State.DONE:
        finish, raw = run.finish()
        return turn_completed(run.lease.turn_id, run.lease.chat_id,
                              (run.strategy or Strategy.REPLAY)._value_, run.degradation,
                              path, run.final_text(), run.stats, finish, raw,
                              run.final_citations())
    abort_step = next(s for s in reversed(path) if s.dest == State.ABORT.value)
    return TurnAborted(turn_id=run.lease.turn_id, chat_id=run.lease.chat_id,
                       reason=abort_step.trigger, detail=run.abort_detail,
                       strategy=run.strategy.value if run.strategy else None,
                       degradation=run.degradation, path=path, stats=run.stats,
                       failure=run.failure)


OVERFLOW = DegradationReason.CONTEXT_OVERFLOW.value
_LOSS_REASONS = frozenset({DegradationReason.CURSOR_EXPIRED.value,
                           DegradationReason.CURSOR_INVALID.value})


def _loss_reason(exc: CursorRejected | ContextLengthExceeded) -> str:
    """The declared cursor-loss trigger of a refused cursor: ``context_overflow`` when
    the cursor's conversation outgrew the window (a cursor loss by another name: replay,
    trimmed, table rule 9; out of a replay it is ``_refused``'s, rule 10), else
    ``cursor_expired`` unless the classifier said ``cursor_invalid``."""
    if isinstance(exc, ContextLengthExceeded):
        return OVERFLOW
    return exc.reason if exc.reason in _LOSS_REASONS else DegradationReason.CURSOR_EXPIRED.value


def _taken_calls(response: ProviderResponse, budget: ResponseBudget,
                 cuts: list[Usage | None]) -> tuple[ToolCallPart, ...]:
    """The response's tool calls, within ``max_tool_calls``. A response asking more is
    refused (``StreamLimitExceeded``), its bill kept in ``cuts``: it was answered whole,
    and the provider bills it (the refusal came after the stream's cut path)."""
    calls = response.tool_calls
    if len(calls) > budget.limits.max_tool_calls:
        cuts.append(billed_usage(response))
        budget.tool_calls(len(calls))  # raises, naming the limit
    return calls


def _delta_events(run: TurnRun, deltas: list[ProviderEvent], budget: ResponseBudget
                  ) -> tuple[list[TurnEvent], ProviderError | None]:
    """A chunk's provider deltas as the turn's events, counted against the response's
    budget once for the chunk, and the budget's refusal when it stopped them (raised once
    the events before it are out). The text joins ``run.streamed`` here: nothing suspends
    between this and the consumer's reading of the chunk's events, so it is what the
    user saw."""
    taken = budget.take_deltas(len(deltas))
    failure = None
    if taken < len(deltas):
        deltas, failure = deltas[:taken], budget.refusal()
    events: list[TurnEvent] = []
    streamed = run.streamed
    for event in deltas:
        if isinstance(event, TextDelta):
            streamed.append(event.text)
            events.append(text_delta_event(event.text))
        elif isinstance(event, ImageOutput):
            part = event.part
            events.append(ImageOutputEvent(media_type=part.media_type or "",
                                           data=part.data or b""))
        else:
            events.append(ReasoningDeltaEvent(text=event.text))
    return events, failure


async def _closed(stream: AsyncGenerator[object, None], run: TurnRun,
                  cuts: list[Usage | None], tries: AttemptBudget) -> None:
    """The call's stream closed, then the requests it saw cut billed to the turn, each
    priced by its own start (a close of a stream cut by the consumer is what records its
    last request), and the HTTP requests it sent beyond the first counted
    (``TurnStats.retries``)."""
    try:
        await stream.aclose()
    finally:
        if cuts:
            run.absorb_cuts(cuts, tries.cut_starts)
    if tries.sent > 1:
        run.count_retries(tries.sent)


def _past_deadline(run: TurnRun, exc: ProviderError) -> Fire:
    """A call whose retry would have waited past the turn's deadline ends the turn
    ``deadline_exceeded``, the provider's failure kept beside it (``TurnAborted.failure``)."""
    seconds = run.expires - asyncio.get_running_loop().time()
    run.abort_detail = (f"the turn's deadline comes in {max(seconds, 0.0):.3g}s, before "
                        f"the retry of its failed provider call could be sent: {exc}")
    run.failure = failure_of(exc)
    return _PAST_DEADLINE


_PAST_DEADLINE = Fire(Trigger.DEADLINE_EXCEEDED, Trigger.DEADLINE_EXCEEDED.value)


def _failed(run: TurnRun, exc: ProviderError, reason: str) -> Fire:
    """A failed call aborts the turn: ``provider_failed``, or ``tool_result_cursor_loss``
    when the failed call was the replay carrying in-flight tool results."""
    run.abort_detail = str(exc)
    run.failure = failure_of(exc)
    if run.current is State.REPLAY and run.facts.tool_results_in_flight:
        return Fire(Trigger.TOOL_RESULT_CURSOR_LOSS, reason)
    return Fire(Trigger.PROVIDER_FAILED, reason)
