"""The turn driver: the only place where a turn does IO.

``TurnEngine.run_turn`` loads the chat, takes its lease, joins the shared machine and
then loops: perform the current state's action (validate, call the provider, run the
tools, commit, record the abort), turn the outcome into a trigger, fire it. Guards and
callbacks stay pure; every await happens here, between triggers.

Cancellation (the consumer stops iterating, or the task is cancelled) ends the turn
``aborted`` with ``cancelled``: the abort is recorded, the lease released, nothing is
half-committed and no new cursor is stored. A commit already under way is shielded and
awaited, so its outcome is known before the turn ends. An unexpected exception in any
state ends the turn ``aborted`` with ``internal_error`` the same way; ``_exits`` holds
these paths, and one ``try`` around the whole turn, from ``begin_turn`` on, uses them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import aclosing
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from transitions import Machine

from turnstate.core._conversation import TextPart
from turnstate.core._decisions import DegradationReason, Strategy, decide_continuation
from turnstate.core._errors import (
    ConfigurationError,
    CursorRejected,
    ProviderError,
)
from turnstate.core._events import (
    ContextSnapshotEvent,
    ContinuationDegraded,
    FallbackNotice,
    ReasoningDeltaEvent,
    StateChanged,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnAborted,
    TurnCompleted,
    TurnEvent,
)
from turnstate.core._registry import DEFAULT_REGISTRY, Registry
from turnstate.engine._exits import (
    Fire,
    cancel,
    commit_outcome,
    internal_error,
    record_abort,
    release,
    unstarted_abort,
    unstarted_events,
)
from turnstate.engine._limits import (
    DEFAULT_TURN_LIMITS,
    ResponseBudget,
    TurnLimits,
    check_input,
)
from turnstate.engine._run import TurnInput, TurnRun, fallback_message
from turnstate.engine._tools import run_tools
from turnstate.engine._tracing import turn_tracer
from turnstate.providers._boundary import guarded, provider_stream
from turnstate.providers._protocol import (
    HttpRequest,
    ProviderAdapter,
    ProviderResponse,
    ReasoningDelta,
    TextDelta,
    Transport,
)
from turnstate.states._machine import shared_machine
from turnstate.states._table import CALL_STATES, FINAL_STATES, State, Trigger
from turnstate.storage._protocol import (
    DEFAULT_LEASE_SECONDS,
    Store,
    TurnAbort,
    TurnLease,
    TurnStart,
)

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

logger = logging.getLogger("turnstate")

Clock = Callable[[], datetime]


Step = TurnEvent | Fire


def _utcnow() -> datetime:
    return datetime.now(UTC)


class TurnEngine:
    """Runs turns against a store, provider adapters and one transport.

    Args:
        store: where chats, messages and turns live.
        adapters: provider registry name → adapter (the sans-IO codec).
        transport: sends the adapters' requests (one aiohttp session for all).
        registry: provider capabilities and model limits.
        clock: the current time (injected in tests).
        lease_seconds: how long a turn may hold its chat before it counts as crashed.
        limits: per-turn limits (user text, deltas and tool calls per response,
            concurrent tool handlers); the stream's own limits are the transport's.
        recover_tool_results: the default of ``TurnInput.recover_tool_results``: recover
            in-flight tool results by replay when a cursor is lost (off unless opted in).
        tracing, tracer_provider, trace_content: OpenTelemetry spans per turn, state and
            provider request (see ``turnstate.engine._tracing`` for when they are on).
    """

    def __init__(
        self,
        store: Store,
        adapters: Mapping[str, ProviderAdapter],
        transport: Transport,
        *,
        registry: Registry = DEFAULT_REGISTRY,
        clock: Clock = _utcnow,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        machine: Machine | None = None,
        limits: TurnLimits = DEFAULT_TURN_LIMITS,
        recover_tool_results: bool = False,
        tracing: bool | None = None,
        tracer_provider: TracerProvider | None = None,
        trace_content: bool = False,
    ) -> None:
        self.store, self.adapters, self.transport = store, dict(adapters), transport
        self.limits = limits
        self.registry, self.clock, self.lease_seconds = registry, clock, lease_seconds
        self.machine = machine if machine is not None else shared_machine()
        self.recover_tool_results = recover_tool_results
        self.tracer = turn_tracer(tracing, tracer_provider, trace_content=trace_content)

    async def run_turn(self, chat_id: str, turn: TurnInput) -> AsyncIterator[TurnEvent]:
        """Run one turn and yield its events (see ``turnstate.core._events``).

        Once the chat's lease is taken, every way out of this generator (the last
        event, an exception, a cancelled task, ``aclose()`` at any event, or the event
        loop closing a dropped iterator) ends the turn recorded as ``done`` or
        ``aborted`` and releases the lease before it returns. An unexpected exception
        ends the turn ``aborted`` with ``internal_error`` (logged with its traceback)
        and is reported as events, like any other abort.

        Raises:
            ChatNotFound, ChatBusy: before any provider call and before any event.
            ConfigurationError: the provider has no adapter or is unknown.
            InvalidInput: the turn's text or tools are refused (``check_input``),
                before the chat is touched.
        """
        lease = await self._begin(chat_id, turn)
        try:
            run = await self._start(lease, turn)
        except BaseException as exc:  # the lease is held: record the turn, then go on
            abort = unstarted_abort(exc)
            await release(self.store, lease, abort, exc)
            if not isinstance(exc, Exception):
                raise
            for event in unstarted_events(lease, abort):
                yield event
            return
        try:
            self.machine.add_model(run.machine_model)
            driven = self._drive(run)
            if self.tracer is not None:
                driven = self.tracer.traced(run, driven)
            async with aclosing(driven) as events:
                async for event in events:
                    yield event
        finally:
            self.machine.remove_model(run.machine_model)
            if run.current not in FINAL_STATES:  # the cancel path itself was interrupted
                await release(self.store, lease, TurnAbort(
                    reason=Trigger.CANCELLED.value, path=tuple(run.machine_model.path),
                    detail="the turn was interrupted while it ended"))

    async def _begin(self, chat_id: str, turn: TurnInput) -> TurnLease:
        """Check the turn and take the chat's lease: nothing is held on failure."""
        check_input(turn, self.limits)
        self.registry.provider(turn.provider)
        self.adapter_for(turn.provider)
        return await self.store.begin_turn(chat_id, TurnStart(
            turn_id=turn.turn_id or uuid.uuid4().hex,
            user_parts=(TextPart(text=turn.user_text),),
            provider=turn.provider, model=turn.model, lease_seconds=self.lease_seconds),
            owner=turn.owner)

    async def _start(self, lease: TurnLease, turn: TurnInput) -> TurnRun:
        capability = self.registry.provider(turn.provider)
        # Read under the lease, so the stored cursor and the committed seq it is checked
        # against are the ones this turn's commit will build on (a chat read before the
        # begin may predate another process's commit). The history itself is read only
        # if the turn replays (in ``_call``): a cursor turn never reads it.
        chat = await self.store.load_chat(lease.chat_id)
        return TurnRun(chat=chat, turn=turn, lease=lease,
                       ctx=turn.turn_context(chat.committed_seq, self.clock()),
                       model=self.registry.model(turn.provider, turn.model),
                       durable=capability.durable,
                       recover=self.recover_tool_results if turn.recover_tool_results is None
                       else turn.recover_tool_results)

    def adapter_for(self, provider: str) -> ProviderAdapter:
        try:
            return self.adapters[provider]
        except KeyError:
            msg = f"no adapter configured for provider {provider!r}"
            raise ConfigurationError(msg) from None

    # --- the loop --------------------------------------------------------------------

    async def _drive(self, run: TurnRun) -> AsyncGenerator[TurnEvent, None]:
        try:
            while run.current not in FINAL_STATES:
                outcome: Fire | None = None
                try:
                    async with aclosing(self._act(run)) as steps:
                        async for step in steps:
                            if isinstance(step, Fire):
                                outcome = step
                            else:
                                yield step
                except Exception as exc:  # a bug or an unexpected failure: abort the turn
                    outcome = await internal_error(self.store, run, exc)
                if outcome is None:  # pragma: no cover - every action ends with a trigger
                    msg = f"state {run.current} produced no trigger"
                    raise RuntimeError(msg)
                yield self._fire(run, outcome)
            yield self._final_event(run)
        except (asyncio.CancelledError, GeneratorExit):
            await cancel(self.store, run)
            raise

    def _act(self, run: TurnRun) -> AsyncGenerator[Step, None]:
        state = run.current
        if state is State.VALIDATE:
            return self._validate(run)
        if state in CALL_STATES:
            return self._call(run)
        if state is State.TOOL_ITERATION:
            return self._tools(run)
        if state is State.PERSIST:
            return self._persist(run)
        return self._abort(run)

    def _fire(self, run: TurnRun, fire: Fire) -> StateChanged:
        source, trigger, reason = run.current, fire.trigger, fire.reason
        dest = run.machine_model.fire(trigger, reason)
        if source is State.VALIDATE and dest in CALL_STATES:
            run.strategy = Strategy(dest.value)
        elif source is State.CURSOR and dest is State.REPLAY:
            run.strategy = Strategy.REPLAY
            run.update_facts(replay_retry_used=True)
        if dest is State.ABORT and run.abort_detail is None:
            run.abort_detail = reason
        return StateChanged(source=source.value, trigger=trigger.value, dest=dest.value,
                            reason=reason)

    # --- actions -----------------------------------------------------------------------

    async def _validate(self, run: TurnRun) -> AsyncGenerator[Step, None]:
        decision = decide_continuation(run.chat.last_provider_state, run.ctx, self.registry)
        if decision.envelope is not None and decision.reason is None:
            run.cursor = decision.envelope.cursor
        if decision.reason is not None:
            async with aclosing(self._degrade(run, decision.reason.value, State.VALIDATE)) as ev:
                async for event in ev:
                    yield event
            yield Fire(Trigger(decision.reason.value), decision.reason.value)
        elif decision.strategy is Strategy.CURSOR:
            yield Fire(Trigger.CONTINUE_WITH_CURSOR, None)
        else:
            yield Fire(Trigger.NO_STORED_STATE, None)

    async def _degrade(
        self, run: TurnRun, reason: str, source: State
    ) -> AsyncGenerator[TurnEvent, None]:
        part = run.transition_part(reason, source)
        logger.warning("[continuation][degraded] chat=%s turn=%s reason=%s strategy=%s from=%s",
                       run.lease.chat_id, run.lease.turn_id, reason, part.strategy, source)
        yield ContinuationDegraded(reason=reason, strategy=part.strategy,
                                   source_state=source.value)
        yield FallbackNotice(reason=reason, message=fallback_message(reason))
        await self.store.record_transition(run.lease, part, clear_provider_state=True)

    async def _call(self, run: TurnRun) -> AsyncGenerator[Step, None]:
        adapter = self.adapter_for(run.turn.provider)
        if run.current is not State.CURSOR and run.history is None:
            # Once per turn: the committed history (the running turn is not in it).
            run.history = await self.store.load_history(run.lease.chat_id)
        call = run.call_for(run.current)
        run.last_call = call
        response: ProviderResponse | None = None
        try:
            request = guarded(adapter.provider, adapter.build_request, call)
            run.count_request(len(request.body))
            async with aclosing(self._stream(adapter, request)) as events:
                async for event in events:
                    if isinstance(event, ProviderResponse):
                        response = event
                    else:
                        yield event
        except CursorRejected as exc:
            async with aclosing(self._cursor_lost(run, exc)) as steps:
                async for step in steps:
                    yield step
            return
        except ProviderError as exc:
            yield _failed(run, exc, exc.code or type(exc).__name__)
            return
        assert response is not None  # _stream always ends with a response
        run.absorb(response)
        run.state = adapter.envelope(run.ctx, response, loop_messages=run.loop,
                                     now=self.clock(), covers_seq=run.lease.assistant_seq)
        yield Fire(Trigger.TOOL_CALLS if response.tool_calls else Trigger.COMPLETED)

    async def _stream(
        self, adapter: ProviderAdapter, request: HttpRequest
    ) -> AsyncGenerator[TurnEvent | ProviderResponse, None]:
        budget = ResponseBudget(adapter.provider, self.limits)
        async with aclosing(provider_stream(self.transport, adapter, request)) as events:
            async for event in events:
                if isinstance(event, ProviderResponse):
                    budget.tool_calls(len(event.tool_calls))
                    yield event
                    continue
                budget.delta()
                if isinstance(event, TextDelta):
                    yield TextDeltaEvent(text=event.text)
                elif isinstance(event, ReasoningDelta):
                    yield ReasoningDeltaEvent(text=event.text)

    async def _cursor_lost(
        self, run: TurnRun, exc: CursorRejected
    ) -> AsyncGenerator[Step, None]:
        reason = exc.reason if exc.reason in {r.value for r in DegradationReason} else \
            DegradationReason.CURSOR_EXPIRED.value
        if run.current is not State.CURSOR:
            yield _failed(run, exc, reason)
        elif run.facts.tool_results_in_flight:
            async with aclosing(self._results_in_flight_lost(run, exc, reason)) as steps:
                async for step in steps:
                    yield step
        else:
            async with aclosing(self._degrade(run, reason, State.CURSOR)) as events:
                async for event in events:
                    yield event
            yield Fire(Trigger(reason), reason)

    async def _results_in_flight_lost(
        self, run: TurnRun, exc: CursorRejected, reason: str
    ) -> AsyncGenerator[Step, None]:
        """The cursor died with tool results in flight: recover them by replay when the
        table allows it (opted in, retry unused), else abort as the default."""
        loss = Trigger.TOOL_RESULT_CURSOR_LOSS
        if run.machine_model.destination(loss) is State.REPLAY:
            async with aclosing(self._degrade(run, loss.value, State.CURSOR)) as events:
                async for event in events:
                    yield event
        else:
            run.abort_detail = str(exc)
            logger.warning("[continuation][degraded] chat=%s turn=%s reason=%s: tool results "
                           "in flight, aborting", run.lease.chat_id, run.lease.turn_id, reason)
        yield Fire(loss, reason)

    async def _tools(self, run: TurnRun) -> AsyncGenerator[Step, None]:
        facts = run.facts
        if facts.iterations_done >= facts.iteration_limit:
            run.abort_detail = f"more than {facts.iteration_limit} tool iterations"
            yield Fire(Trigger.TOOL_ITERATION_LIMIT, None)
            return
        assert run.last_response is not None and run.last_call is not None
        calls = run.last_response.tool_calls
        iteration = facts.iterations_done + 1
        for call in calls:
            yield ToolCallEvent(call_id=call.call_id, name=call.name,
                                arguments=call.arguments, iteration=iteration)
        results = await run_tools(calls, run.tools, self.limits.max_concurrent_tools)
        for result in results:
            yield ToolResultEvent(call_id=result.call_id, name=result.name,
                                  output=result.output, is_error=result.is_error,
                                  iteration=iteration)
        run.parts.extend(results)
        run.pending_results = tuple(results)
        adapter = self.adapter_for(run.turn.provider)
        run.loop = adapter.extend_loop(run.last_call, run.last_response, results)
        run.update_facts(iterations_done=iteration, tool_results_in_flight=True)
        yield Fire(Trigger.TOOLS_DONE, None)

    async def _persist(self, run: TurnRun) -> AsyncGenerator[Step, None]:
        snapshot = run.snapshot(self.registry)
        run.commit_task = asyncio.ensure_future(
            self.store.commit_turn(run.lease, run.commit_record(snapshot)))
        failure = await commit_outcome(run)
        if failure is not None:
            yield failure
            return
        if run.degradation and run.state is not None and run.state.mode.durable:
            logger.info("[continuation][recovered] chat=%s turn=%s reason=%s cursor=%s",
                        run.lease.chat_id, run.lease.turn_id, run.degradation, run.state.cursor)
        yield ContextSnapshotEvent(snapshot=snapshot)
        yield Fire(Trigger.COMMITTED, None)

    async def _abort(self, run: TurnRun) -> AsyncGenerator[Step, None]:
        await record_abort(self.store, run)
        yield Fire(Trigger.ABORT_RECORDED, None)

    def _final_event(self, run: TurnRun) -> TurnEvent:
        path = tuple(run.machine_model.path)
        if run.current is State.DONE:
            return TurnCompleted(turn_id=run.lease.turn_id, chat_id=run.lease.chat_id,
                                 strategy=(run.strategy or Strategy.REPLAY).value,
                                 degradation=run.degradation, path=path,
                                 text=run.final_text(), stats=run.stats)
        abort_step = next(s for s in reversed(path) if s.dest == State.ABORT.value)
        return TurnAborted(turn_id=run.lease.turn_id, chat_id=run.lease.chat_id,
                           reason=abort_step.trigger, detail=run.abort_detail,
                           strategy=run.strategy.value if run.strategy else None,
                           degradation=run.degradation, path=path, stats=run.stats)


def _failed(run: TurnRun, exc: ProviderError, reason: str) -> Fire:
    """A failed call aborts the turn: ``provider_failed``, or ``tool_result_cursor_loss``
    when the failed call was the replay carrying in-flight tool results."""
    run.abort_detail = str(exc)
    if run.current is State.REPLAY and run.facts.tool_results_in_flight:
        return Fire(Trigger.TOOL_RESULT_CURSOR_LOSS, reason)
    return Fire(Trigger.PROVIDER_FAILED, reason)
