"""What every route reads from the application: the engine, the owners' tokens, limits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime

import attrs
from aiohttp import web

from turnstate.core._conversation import Tool
from turnstate.core._events import TurnAborted, TurnCompleted
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine
from turnstate.engine._live import LiveTurn
from turnstate.server._auth import TokenBook
from turnstate.server._config import ServerConfig
from turnstate.server._metrics import Metrics
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
    cancelled_at_shutdown: int = 0
    stopping: bool = False

    @property
    def store(self) -> Store:
        return self.engine.store

    def turn_finished(self, live: LiveTurn) -> None:
        """Count a finished turn in the metrics (called once per turn, however many
        streams followed it)."""
        seconds = time.perf_counter() - live.started_at
        final = live.final
        if isinstance(final, TurnCompleted | TurnAborted):
            self.metrics.turn_finished(live.provider, final, seconds)
        else:  # pragma: no cover - a detached turn always ends with its final event
            self.metrics.turn_cancelled(seconds)

    def providers(self) -> list[str]:
        """Providers this server can run turns on: known to the registry, with an adapter."""
        return [name for name in self.engine.registry.providers if name in self.engine.adapters]


SERVICES = web.AppKey("services", Services)
