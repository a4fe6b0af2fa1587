"""What every route reads from the application: the engine, the owners' tokens, limits."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import datetime

import attrs
from aiohttp import web

from turnstate.core._conversation import Tool
from turnstate.core._events import TurnAborted, TurnCompleted
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.engine._live import LiveTurn
from turnstate.server._auth import TokenBook
from turnstate.server._config import ServerConfig
from turnstate.server._http import ApiError
from turnstate.server._metrics import Metrics
from turnstate.server._owner_limits import LargeSlot, OwnerLimits
from turnstate.server._sse import FirstPings
from turnstate.storage import Store


@attrs.define(kw_only=True)
class Services:
    """The server's collaborators (mutable only in ``turn_tasks`` and the shutdown state)."""

    engine: TurnEngine
    tokens: TokenBook
    config: ServerConfig
    metrics: Metrics
    tools: dict[str, Tool]
    emulators: EmulatedProviders | None
    clock: Callable[[], datetime]
    turn_tasks: set[asyncio.Task[object]] = attrs.field(factory=set)
    first_pings: FirstPings = attrs.field(  # the streams' first heartbeats, one timer
        default=attrs.Factory(lambda self: FirstPings(self.config.heartbeat_seconds),
                              takes_self=True))
    limits: OwnerLimits = attrs.field(  # each owner's open streams and running turns
        default=attrs.Factory(lambda self: OwnerLimits(
            self.config.max_streams_per_owner, self.config.max_turns_per_owner,
            self.config.max_large_bodies_per_owner), takes_self=True))
    cancelled_at_shutdown: int = 0
    stopping: bool = False

    @property
    def store(self) -> Store:
        return self.engine.store

    def turn_finished(self, live: LiveTurn) -> None:
        """Count a finished turn in the metrics and log it (once per turn, however many
        streams followed it), a loop step later.

        The turn's runner calls this right after publishing the final event, before the
        streams that follow the turn get to send it; deferred, the counting and the log
        line run after those sends (the streams were woken first), not on the turn's
        latency path (issue 26). The turn's time is taken now, and its owner's count of
        running turns given back."""
        self.limits.turn_ended(live.owner or "")
        self.limits.large_turn_ended(live.turn_id)
        seconds = time.perf_counter() - live.started_at
        asyncio.get_running_loop().call_soon(self._count, live, seconds)

    def _count(self, live: LiveTurn, seconds: float) -> None:
        final = live.final
        if isinstance(final, TurnCompleted | TurnAborted):
            self.metrics.turn_finished(live.provider, final, seconds)
        else:  # pragma: no cover - a detached turn always ends with its final event
            self.metrics.turn_cancelled(seconds)
        _log_turn(live, final)

    async def start_turn(self, chat_id: str, turn: TurnInput,
                         large: LargeSlot | None = None) -> LiveTurn:
        """``engine.start_turn``, counted among its owner's running turns (429 past
        ``max_turns_per_owner``); a turn that does not start is not counted. Once the
        server is stopping, none starts: 503 ``shutting_down`` (another node takes it).
        A turn with a ``large`` body holds its slot to its end."""
        if self.stopping:
            raise ApiError(503, "shutting_down", "this server is shutting down; try again",
                           headers={"Retry-After": "1", "Connection": "close"})
        owner = turn.owner or ""
        self.limits.take_turn(owner)
        if large is not None and turn.turn_id is not None:
            large.hand_to(turn.turn_id)
        try:
            return await self.engine.start_turn(chat_id, turn)
        except BaseException:
            self.limits.turn_ended(owner)
            if large is not None:
                large.take_back()
            raise

    def providers(self) -> list[str]:
        """Providers this server can run turns on: known to the registry, with an adapter."""
        return [name for name in self.engine.registry.providers if name in self.engine.adapters]


_LOG = logging.getLogger("turnstate")

SERVICES = web.AppKey("services", Services)


def _log_turn(live: LiveTurn, final: object) -> None:
    """One line per turn: info when it completed, warning when it aborted for a reason
    other than a cancel (the server stopping, or its client leaving with
    ``--cancel-on-disconnect``) or a user's stop."""
    if isinstance(final, TurnAborted) and final.reason not in ("cancelled", "stopped"):
        level, outcome, reason = logging.WARNING, "aborted", final.reason
    elif isinstance(final, TurnCompleted):
        level, outcome, reason = logging.INFO, "completed", None
    else:
        reason = final.reason if isinstance(final, TurnAborted) else "cancelled"
        level, outcome = logging.INFO, reason
    if _LOG.isEnabledFor(level):
        _LOG.log(level, "turn %s %s%s", live.turn_id, outcome, f" ({reason})" if reason else "",
                 extra={"turn_id": live.turn_id, "chat_id": live.chat_id, "owner": live.owner,
                        "outcome": outcome, "reason": reason})
