"""What every route reads from the application: the engine, the owners' tokens, limits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime

import attrs
from aiohttp import web

from turnstate.core._conversation import Tool
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine
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

    def providers(self) -> list[str]:
        """Providers this server can run turns on: known to the registry, with an adapter."""
        return [name for name in self.engine.registry.providers if name in self.engine.adapters]


SERVICES = web.AppKey("services", Services)
