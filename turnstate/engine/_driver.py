"""``TurnEngine``: the engine's configuration and its one entry point, ``run_turn``.

A turn's life (its lease, heartbeat, exits and cancellation) is ``_lifecycle``'s, read
there top to bottom; the states' actions are ``_steps``; the turn's working memory is
``_run``. The engine holds the collaborators they share.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Mapping
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Self

from transitions import Machine

from turnstate.core._cost import CachePolicy
from turnstate.core._errors import ConfigurationError, EngineClosed
from turnstate.core._events import TurnEvent
from turnstate.core._overflow import ContextCalibrations
from turnstate.core._registry import DEFAULT_REGISTRY, Registry
from turnstate.engine._detached import DetachedTurns
from turnstate.engine._follow import Following
from turnstate.engine._histories import HistoryCache
from turnstate.engine._lease import FirstBeats, LeaseKeeper, watch_fences
from turnstate.engine._lifecycle import TurnLife
from turnstate.engine._limits import DEFAULT_TURN_LIMITS, TurnLimits
from turnstate.engine._live import LiveTurn
from turnstate.engine._tracing import turn_tracer
from turnstate.engine._turn_input import TurnInput
from turnstate.providers._protocol import ProviderAdapter, Transport
from turnstate.states._machine import shared_machine
from turnstate.states._table import Trigger
from turnstate.storage._protocol import DEFAULT_LEASE_SECONDS, Store, TurnRecord

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


def options_problem(store: object, adapters: object, *, registry: object, limits: object,
                    lease_seconds: object, heartbeat_seconds: object, recover: object,
                    cache_policy: object) -> str | None:
    """What makes ``TurnEngine``'s options unusable, or None: each had its type taken on
    trust and failed later, most inside the first turn (a dict for ``limits`` or
    ``registry``, ``None`` for the store), some as bare errors here."""
    kinds = (("limits", limits, TurnLimits), ("registry", registry, Registry),
             ("adapters", adapters, Mapping))
    for name, value, kind in kinds:
        if not isinstance(value, kind):
            return f"{name} must be a {kind.__name__}, got {type(value).__name__}"
    if not all(hasattr(store, name) for name in ("begin_turn", "commit_turn", "load_chat")):
        return f"store must be a Store, got {type(store).__name__}"
    for name, seconds in (("lease_seconds", lease_seconds),
                          ("heartbeat_seconds", heartbeat_seconds)):
        if (seconds is not None or name == "lease_seconds") and (
                isinstance(seconds, bool) or not isinstance(seconds, int | float)):
            return f"{name} must be a number of seconds, got {seconds!r}"
    if type(recover) is not bool:
        return f"recover_tool_results must be True or False, got {recover!r}"
    if cache_policy not in set(CachePolicy):
        return f"cache_policy {cache_policy!r} is not one of {', '.join(CachePolicy)}"
    return None


class TurnEngine:
    """Runs turns against a store, provider adapters and one transport.

    Args:
        store: where chats, messages and turns live.
        adapters: provider registry name → adapter (the sans-IO codec).
        transport: sends the adapters' requests (one aiohttp session for all).
        registry: provider capabilities and model limits.
        clock: the current time (injected in tests).
        lease_seconds: how long a turn holds its chat without a renewal (30 s): a
            crashed node's chats come free this long after its last heartbeat.
        heartbeat_seconds: how often a running turn renews its lease (a third of
            ``lease_seconds`` when None).
        limits: per-turn limits (user text, deltas and tool calls per response,
            concurrent tool handlers); the stream's own limits are the transport's.
        recover_tool_results: the default of ``TurnInput.recover_tool_results``: recover
            in-flight tool results by replay when a cursor is lost (off unless opted in).
        tracing, tracer_provider, trace_content: OpenTelemetry spans per turn, state and
            provider request (see ``turnstate.engine._tracing`` for when they are on).
        cache_policy: the default of ``ContextSettings.cache``: prompt caching for
            requests that do not say (``auto``: breakpoints, cache keys, stable prefixes).

    Raises:
        ConfigurationError: a lease or heartbeat that is not a positive number, or a
            heartbeat not shorter than the lease.
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
        heartbeat_seconds: float | None = None,
        machine: Machine | None = None,
        limits: TurnLimits = DEFAULT_TURN_LIMITS,
        recover_tool_results: bool = False,
        tracing: bool | None = None,
        tracer_provider: TracerProvider | None = None,
        trace_content: bool = False,
        cache_policy: CachePolicy = CachePolicy.AUTO,
    ) -> None:
        problem = options_problem(
            store, adapters, registry=registry, limits=limits, lease_seconds=lease_seconds,
            heartbeat_seconds=heartbeat_seconds, recover=recover_tool_results,
            cache_policy=cache_policy)
        if problem is not None:
            raise ConfigurationError(problem)
        beat = lease_seconds / 3 if heartbeat_seconds is None else heartbeat_seconds
        if not (0 < beat < lease_seconds < float("inf")):
            msg = (f"need 0 < heartbeat_seconds < lease_seconds, got {beat!r} and "
                   f"{lease_seconds!r}")
            raise ConfigurationError(msg)
        self.store, self.adapters, self.transport = store, dict(adapters), transport
        self.limits = limits
        self.registry, self.clock = registry, clock
        self.lease_seconds, self.heartbeat_seconds = lease_seconds, beat
        self.machine = machine if machine is not None else shared_machine()
        self.recover_tool_results = recover_tool_results
        self.cache_policy = CachePolicy(cache_policy)
        # Per chat, the provider's tokens per estimated token learnt from its refusals
        # (a hint for how much a replay trims; never continuation state).
        self.calibrations = ContextCalibrations()
        # Per chat, the committed history last read, so the next replay reads only what
        # was committed since (``_histories``).
        self.histories = HistoryCache()
        self.tracer = turn_tracer(tracing, tracer_provider, trace_content=trace_content)
        # Detached turns (issue 21): the turns their runner asked to end, and the runner.
        self.endings: dict[str, Trigger] = {}
        self.attached: dict[str, LeaseKeeper] = {}  # turns run here, for stop (issue: embedder)
        self.first_beats: FirstBeats | None = None  # its turns' heartbeats, one timer
        self.detached = DetachedTurns(self)
        self._sweepers: set[asyncio.Task[object]] = set()  # tasks running ``maintain``
        self._unwatch = watch_fences(store, self)

    def fence_signalled(self, turn_id: str) -> None:
        """The store took ``turn_id``'s lease from it (a reclaim, a release: its
        ``TurnSignals.fenced``): a turn of this engine's stops now, ``lease_lost``, its
        provider call or tool run cancelled, as at a refused renewal."""
        keeper = self.attached.get(turn_id)
        if keeper is not None:
            keeper.fenced(f"turn {turn_id!r}: the store took its lease from it "
                          "(released, or reclaimed as expired)")

    def run_turn(self, chat_id: str, turn: TurnInput) -> AsyncGenerator[TurnEvent, None]:
        """Run one turn and yield its events (see ``turnstate.core._events``).

        Once the chat's lease is taken, every way out of this generator (the last
        event, an exception, a cancelled task, ``aclose()`` at any event, or the event
        loop closing a dropped iterator) ends the turn recorded as ``done`` or
        ``aborted`` and releases the lease before it returns; ``_lifecycle`` tells how.
        Unexpected failures are reported as events, like any other abort.

        Raises:
            ChatNotFound, ChatBusy: before any provider call and before any event
                (``ChatBusy`` too for a retry of a turn id that is still running).
            TurnAlreadyRecorded: the turn id names an aborted turn, or another chat's.
            ConfigurationError: the provider has no adapter or is unknown.
            InvalidInput: the turn's text or tools are refused (``check_input``), its
                settings do not suit the provider or model (``check_settings``), or the
                model is unknown under the registry's ``strict`` policy: before the chat
                is touched.
        """
        return TurnLife(self, chat_id, turn, attached=True).run()

    def run_detached_turn(self, chat_id: str, turn: TurnInput,
                          ) -> AsyncGenerator[TurnEvent, None]:
        """``run_turn`` for ``start_turn``'s runner: the same turn, begun unattached (its
        events are logged, ``TurnStart.attached``)."""
        return TurnLife(self, chat_id, turn, attached=False).run()

    async def start_turn(self, chat_id: str, turn: TurnInput) -> LiveTurn:
        """Run one turn detached from its consumer (``_detached``): it goes on to its end
        whoever follows it. Returns once its first event is out; follow it with
        ``follow``. Raises what ``run_turn`` raises before its first event, and
        ``EngineClosed`` once ``aclose`` has begun (nothing begun, nothing stored: no
        sweep would end such a turn; a start already in flight then ends ``cancelled``)."""
        if self.detached.closing:
            msg = "the engine is closed (aclose): start_turn takes no new turn"
            raise EngineClosed(msg)
        return await self.detached.start(chat_id, turn)

    async def follow(self, chat_id: str, turn_id: str, *, after: int = 0,
                     owner: str | None = None) -> Following:
        """A detached turn's events after the id ``after``, from any node."""
        return await self.detached.follow(chat_id, turn_id, after=after, owner=owner)

    async def stop(self, turn_id: str, *, owner: str | None = None,
                   chat_id: str | None = None) -> TurnRecord:
        """Ask a turn to stop: a detached one wherever it runs, one a consumer iterates
        with ``run_turn`` on this engine (its loop then gets ``turn_aborted`` ``stopped``);
        ``TurnFinished`` if it had ended."""
        return await self.detached.stop(turn_id, owner=owner, chat_id=chat_id)

    async def maintain(self, *, every: float | None = None) -> None:
        """The sweeps a process running detached turns needs, every ``every`` seconds
        (by default half a lease, at least 1 s) until cancelled or ``aclose``: end the
        turns whose lease ran out (a dead node's: their followers get the final event,
        their chats come free) and delete the event logs of turns that ended more than
        ten minutes ago. Run one per process, as a task: ``asyncio.create_task(
        engine.maintain())``. A failed sweep is logged and tried again."""
        if self.detached.closing:  # a task started after ``aclose``: nothing to sweep for
            return
        task = asyncio.current_task()
        assert task is not None  # a coroutine awaited in a loop runs in a task
        self._sweepers.add(task)
        try:
            await self.detached.maintain(every)
        finally:
            self._sweepers.discard(task)

    async def aclose(self) -> int:
        """Shut the engine down before its store and transport close: every detached
        turn running here ends ``aborted`` with reason ``cancelled`` (its followers get
        that final event, its chat comes free), a turn starting now ends so as soon as it
        has begun, the engine's tasks end (``maintain`` included), and it returns once
        their ends are recorded and logged: how many turns it ended. Turns iterated with
        ``run_turn`` belong to their consumers (close your server's handlers first).
        Closing twice is harmless."""
        self._unwatch()
        sweepers = tuple(self._sweepers)
        for task in sweepers:
            task.cancel()
        if sweepers:  # their ends, without taking a cancel of our own caller for theirs
            await asyncio.wait(sweepers)
        return await self.detached.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.aclose()
