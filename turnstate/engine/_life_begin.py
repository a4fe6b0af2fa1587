"""The beginning of a turn's life (``_lifecycle`` steps 1-3): the input checked, the
lease taken, the turn's run started; or, for a turn that will not run, its events.

``TurnBegin`` is ``TurnLife``'s beginning (a mixin: the life's ``engine``, ``chat_id``,
``turn``, ``store`` and ``steps`` are its state), kept apart so the drive loop, the
commit and the exits read on their own in ``_lifecycle``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Protocol

from transitions import Machine

from turnstate.core._conversation import Part
from turnstate.core._cost import CachePolicy
from turnstate.core._errors import ConfigurationError, StorageUnavailable, TurnAlreadyRecorded
from turnstate.core._errors_storage import STORAGE_OUTAGES
from turnstate.core._events import TurnEvent
from turnstate.core._frozen import slot_maker
from turnstate.core._registry import ModelInfo
from turnstate.engine._eager import eager_future
from turnstate.engine._lease import FirstBeats, LeaseKeeper
from turnstate.engine._limits import check_turn, turn_seconds
from turnstate.engine._patience import patiently
from turnstate.engine._retried import stored_outcome
from turnstate.engine._run import TurnRun
from turnstate.engine._steps import TurnServices, TurnSteps
from turnstate.engine._tracing import TurnTracer
from turnstate.engine._turn_input import TurnInput, new_turn_id
from turnstate.engine._writes import (
    ABORT_GRACE_SECONDS,
    record_abort,
    unanswered_lease,
    unstarted_abort,
    unstarted_events,
)
from turnstate.states._table import Trigger
from turnstate.storage._expected import CutExpected
from turnstate.storage._protocol import Store, TurnLease, TurnStart


class TurnOwner(TurnServices, Protocol):
    """What a turn's life reads from its engine (``TurnEngine`` provides it)."""

    machine: Machine
    tracer: TurnTracer | None
    lease_seconds: float
    heartbeat_seconds: float
    recover_tool_results: bool
    cache_policy: CachePolicy
    endings: dict[str, Trigger]  # detached turns their runner asked to end (_stopping)
    attached: dict[str, LeaseKeeper]  # the turns running here, for ``stop`` to reach
    first_beats: FirstBeats | None  # the heartbeats waiting to start (_lease)


# without attrs' __init__ (_frozen)
_start: Callable[[str, Sequence[Part], str, str, float, int | None, bool, str | None,
                  CutExpected | None], TurnStart] = (
    slot_maker(TurnStart))
_BACKGROUND: set[asyncio.Task[None]] = set()  # releases that outlive a cancelled caller


class TurnBegin:
    """The beginning of ``TurnLife`` (see the module docstring)."""

    engine: TurnOwner
    chat_id: str
    turn: TurnInput
    store: Store
    steps: TurnSteps
    attached: bool  # iterated by its consumer (``run_turn``): its events are not logged

    async def _begin(self) -> tuple[TurnRun, LeaseKeeper] | list[TurnEvent]:
        """1-3: the input checked, the lease taken, the turn's run started and its
        heartbeat beating; or, for a turn that will not run, its events."""
        engine, turn = self.engine, self.turn
        tools_digest, capability, model = check_turn(turn, engine.limits, engine.registry,
                                                     self.steps.adapter_for)
        try:
            keeper = await self._take()
        except TurnAlreadyRecorded:
            return list(await stored_outcome(self.store, self.chat_id, self.turn))
        try:
            _check_replaced(turn.replace_from, keeper.lease)
            run = await self._start(keeper, tools_digest, capability.durable, model)
        except BaseException as exc:  # the lease is held: record the turn, then go on
            return list(await self._unstarted(keeper, exc))
        self.turn = run.turn  # its media are the run's now, let go between requests
        seconds = turn_seconds(turn, engine.limits)
        run.expires = keeper.sent_at + seconds  # a provider retry's wait stops short of it
        engine.first_beats = keeper.start(engine.first_beats, seconds)
        engine.machine.add_model(run.machine_model)
        return run, keeper

    async def _take(self) -> LeaseKeeper:
        engine, turn = self.engine, self.turn
        # turn_id, user_parts, provider, model, lease_seconds, replace_from, attached,
        # client_key, expect
        start = _start(turn.turn_id or new_turn_id(), turn.user_parts, turn.provider,
                       turn.model, engine.lease_seconds, turn.replace_from, self.attached,
                       turn.client_key, turn.expect)
        sent = asyncio.get_running_loop().time()
        # Eagerly: a store that completes without suspending costs no loop iteration.
        # One that suspends is finished by its task, awaited through shield.
        begun = eager_future(self.store.begin_turn(self.chat_id, start, owner=turn.owner))
        try:
            if begun.done():
                lease = begun.result()
            else:
                try:
                    lease = await asyncio.shield(begun)
                except asyncio.CancelledError:
                    # The chat is given back before the cancel goes on (the caller's
                    # next turn must not meet this one's lease), within the lease.
                    await _waited(_in_background(
                        self._release_orphan(begun, start.turn_id, sent)),
                        sent + engine.lease_seconds)
                    raise
        except StorageUnavailable as exc:  # the reply is lost: the begin may have landed
            # shielded: a cancel meanwhile leaves the release to finish in the background
            await asyncio.shield(_in_background(
                self._release_unanswered(start.turn_id, sent, exc)))
            raise
        return self._keeper(lease, sent)

    async def _release_orphan(self, begin: asyncio.Future[TurnLease], turn_id: str,
                              sent: float) -> None:
        """A begin whose caller was cancelled: if it took the lease, give it back."""
        try:
            lease = await begin
        except StorageUnavailable as exc:
            await self._release_unanswered(turn_id, sent, exc)
            return
        except Exception:
            return  # nothing was taken
        except asyncio.CancelledError:
            if begin.cancelled():  # the begin itself (loop shutdown): its lease expires
                return
            raise
        await record_abort(self._keeper(lease, sent),
                           unstarted_abort(asyncio.CancelledError()))

    async def _release_unanswered(self, turn_id: str, sent: float,
                                  exc: StorageUnavailable) -> None:
        """A begin whose reply was lost (``StorageUnavailable``: a write that landed whole
        or not at all): the turn, when the store holds it running, is released now, not
        when its lease runs out (until then the chat was busy with a turn nobody runs)."""
        lease = await unanswered_lease(self.store, self.chat_id, turn_id)
        if lease is not None:
            await record_abort(self._keeper(lease, sent), unstarted_abort(exc))

    def _keeper(self, lease: TurnLease, sent: float) -> LeaseKeeper:
        return LeaseKeeper(self.store, lease, lease_seconds=self.engine.lease_seconds,
                           interval=self.engine.heartbeat_seconds, sent_at=sent)

    async def _unstarted(self, keeper: LeaseKeeper,
                         exc: BaseException) -> tuple[TurnEvent, ...]:
        """A turn that failed between its lease and its machine: recorded, then its
        events (a cancellation or an exit is re-raised once recorded)."""
        abort = unstarted_abort(exc)
        await record_abort(keeper, abort)
        if not isinstance(exc, Exception):
            raise exc
        return unstarted_events(keeper.lease, abort)

    async def _start(self, keeper: LeaseKeeper, tools_digest: str, durable: bool,
                     model: ModelInfo) -> TurnRun:
        """The turn's working memory; ``durable`` and ``model``: the provider's and the
        model's registry entries as ``run`` read them for its checks (not read again).
        The chat's read rides out a short outage (``_patience``)."""
        engine, turn, lease = self.engine, self.turn, keeper.lease
        # Read under the lease, so the stored cursor and the committed seq it is checked
        # against are the ones this turn's commit builds on (a store that read the chat
        # in its begin hands it over on the lease). The history itself is read only if
        # the turn replays: a cursor turn never reads it.
        chat = lease.chat
        if chat is None:
            try:
                chat = await self.store.load_chat(lease.chat_id)
            except STORAGE_OUTAGES:  # the store away for a moment: again, while the lease lasts
                chat = await patiently(keeper, lambda: self.store.load_chat(lease.chat_id),
                                       "reading its chat")
        return TurnRun(chat=chat, turn=turn, lease=lease,
                       ctx=turn.turn_context(chat.committed_seq, engine.clock(),
                                             tools_digest=tools_digest,
                                             context_state=chat.last_context_state),
                       model=model, durable=durable,
                       recover=engine.recover_tool_results if turn.recover_tool_results
                       is None else turn.recover_tool_results, cache=engine.cache_policy)


async def _waited(release: asyncio.Task[None], until: float) -> None:
    """Wait for ``release`` until the loop's time ``until`` (when the lease it gives
    back would run out anyway; at least ``ABORT_GRACE_SECONDS``), as an abort's write
    is waited for: past that, or at a second cancel (raised), it goes on alone."""
    loop = asyncio.get_running_loop()
    await asyncio.wait((release,), timeout=max(until - loop.time(), ABORT_GRACE_SECONDS))


def _in_background(coro: Coroutine[object, object, None]) -> asyncio.Task[None]:
    task = asyncio.ensure_future(coro)
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)
    return task


def _check_replaced(replace_from: int | None, lease: TurnLease) -> None:
    """A store that took the lease but ignored ``replace_from`` (a custom store written
    before the field) appended the question after the messages it was to replace: its
    seq lies past ``replace_from``, where a store that cut puts it at or before (after
    deleted messages' gaps). Refused as a broken store, not run as a regenerate.

    Raises:
        ConfigurationError: the store does not implement ``TurnStart.replace_from``.
    """
    if replace_from is not None and lease.user_seq > replace_from:
        msg = (f"the store ignored replace_from={replace_from}: it stored the question "
               f"at seq {lease.user_seq} (a store must cut the chat from that seq in "
               "begin_turn; see turnstate.testing's store suite)")
        raise ConfigurationError(msg)
