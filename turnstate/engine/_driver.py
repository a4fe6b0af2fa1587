"""The turn driver: with the states' actions (``_actions``), the only place where a turn
does IO.

``TurnEngine.run_turn`` takes the chat's lease, loads the chat, joins the shared machine
and then loops: perform the current state's action (validate, call the provider, run the
tools, commit, record the abort), turn the outcome into a trigger, fire it. Guards and
callbacks stay pure; every await happens in the actions or here, between triggers.

Cancellation (the consumer stops iterating, or the task is cancelled) ends the turn
``aborted`` with ``cancelled``: the abort is recorded, the lease released, nothing is
half-committed and no new cursor is stored. A commit already under way is shielded and
awaited, so its outcome is known before the turn ends. An unexpected exception in any
state ends the turn ``aborted`` with ``internal_error`` the same way; ``_exits`` holds
these paths, and one ``try`` around the whole turn, from ``begin_turn`` on, uses them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import aclosing
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from transitions import Machine

from turnstate.core._conversation import TextPart
from turnstate.core._cost import CachePolicy
from turnstate.core._decisions import Strategy
from turnstate.core._events import (
    StateChanged,
    TurnEvent,
)
from turnstate.core._generation import check_settings
from turnstate.core._registry import DEFAULT_REGISTRY, Registry
from turnstate.engine._actions import Step, TurnActions, final_event
from turnstate.engine._exits import (
    Fire,
    cancel,
    internal_error,
    release,
    unstarted_abort,
    unstarted_events,
)
from turnstate.engine._limits import (
    DEFAULT_TURN_LIMITS,
    TurnLimits,
    check_input,
)
from turnstate.engine._run import TurnInput, TurnRun
from turnstate.engine._tracing import turn_tracer
from turnstate.providers._protocol import (
    ProviderAdapter,
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

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class TurnEngine(TurnActions):
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
        cache_policy: the default of ``ContextSettings.cache``: prompt caching for
            requests that do not say (``auto``: breakpoints, cache keys, stable prefixes).
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
        cache_policy: CachePolicy = CachePolicy.AUTO,
    ) -> None:
        self.store, self.adapters, self.transport = store, dict(adapters), transport
        self.limits = limits
        self.registry, self.clock, self.lease_seconds = registry, clock, lease_seconds
        self.machine = machine if machine is not None else shared_machine()
        self.recover_tool_results = recover_tool_results
        self.cache_policy = CachePolicy(cache_policy)
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
            InvalidInput: the turn's text or tools are refused (``check_input``), its
                settings do not suit the provider or model (``check_settings``), or the
                model is unknown under the registry's ``strict`` policy: before the chat
                is touched.
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
        capability = self.registry.provider(turn.provider)
        self.adapter_for(turn.provider)
        model = self.registry.model(turn.provider, turn.model)
        check_settings(turn.settings, capability, model, [t.spec.name for t in turn.tools])
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
                       else turn.recover_tool_results, cache=self.cache_policy)

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
            yield final_event(run)
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
