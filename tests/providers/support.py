"""What the provider tests share: messages, calls, request bodies, an injected sleep and
the loopback rig of a durable emulator (emulator, server, transport, adapter)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import aiohttp
import attrs

from turnstate.core._conversation import Message, MessageStatus, Part, Role
from turnstate.core._decisions import Strategy
from turnstate.emulators._base import ChainedEmulator, EmulatorServer
from turnstate.providers._protocol import (
    ProviderAdapter,
    ProviderCall,
    ProviderResponse,
    SseEvent,
    StreamParser,
)
from turnstate.providers._transport import AiohttpTransport, RetryPolicy

AT = datetime(2026, 12, 2, tzinfo=UTC)
"""When every test message was written (codecs never read it)."""


def message(seq: int, role: Role, *parts: Part, chat_id: str = "c") -> Message:
    """A committed message ``m{seq}`` of chat ``chat_id``."""
    return Message(id=f"m{seq}", chat_id=chat_id, seq=seq, role=role,
                   status=MessageStatus.COMPLETED, parts=parts, created_at=AT, updated_at=AT)


def provider_call(defaults: dict[str, Any], **changes: Any) -> ProviderCall:
    """A call from a test module's ``defaults``, with ``changes`` on top."""
    return ProviderCall(**{**defaults, **changes})


def request_json(adapter: ProviderAdapter, call: ProviderCall) -> Any:
    """The decoded JSON body ``adapter`` sends for ``call``."""
    return json.loads(adapter.build_request(call).body)


def parse_stream(
    parser: StreamParser, events: Iterable[SseEvent]
) -> tuple[ProviderResponse, list[Any]]:
    """Feed every event to ``parser``, which must then be done: the response and the
    deltas it streamed."""
    deltas: list[Any] = []
    for event in events:
        deltas.extend(parser.feed(event))
    assert parser.done
    return parser.finish(), deltas


class Sleeps:
    """An injected sleep that records the delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


async def stream_call(
    transport: AiohttpTransport, adapter: ProviderAdapter, call: ProviderCall
) -> tuple[ProviderResponse, list[Any]]:
    """Send ``call`` through ``transport``; the parsed response and the streamed deltas."""
    parser = adapter.stream_parser()
    deltas: list[Any] = []
    async for event in transport.stream(adapter.build_request(call), adapter.classify_error):
        deltas.extend(parser.feed(event))
        if parser.done:
            break
    return parser.finish(), deltas


@attrs.define
class ChainedEnv:
    """A durable emulator on loopback with a transport (two attempts, recorded sleeps)
    and an adapter pointed at it; ``defaults`` are the module's call fields and
    ``auth`` writes a key as the provider's header."""

    emulator: Any
    server: EmulatorServer
    transport: AiohttpTransport
    adapter: Any
    sleeps: Sleeps
    session: aiohttp.ClientSession
    defaults: dict[str, Any]
    auth: Callable[[str], dict[str, str]]

    @property
    def url(self) -> str:
        """The create endpoint (under the emulator's first prefix)."""
        prefix = self.emulator.API_PREFIXES[0]
        return f"{self.server.base_url}{prefix}/{self.emulator.RESOURCE}"

    def call(self, **changes: Any) -> ProviderCall:
        return provider_call(self.defaults, **changes)

    async def run(self, call: ProviderCall, adapter: ProviderAdapter | None = None,
                  ) -> tuple[ProviderResponse, list[Any]]:
        return await stream_call(self.transport, adapter or self.adapter, call)

    async def post(self, payload: dict[str, Any], *, key: str | None = "test-key",
                   ) -> tuple[int, Any]:
        """POST a raw body to the create endpoint: the status and the decoded answer."""
        headers = self.auth(key) if key else {}
        async with self.session.post(self.url, json=payload, headers=headers) as response:
            return response.status, await response.json()


@asynccontextmanager
async def chained_env(
    emulator: ChainedEmulator,
    adapter_for: Callable[[str], Any],
    *,
    defaults: dict[str, Any],
    auth: Callable[[str], dict[str, str]],
) -> AsyncIterator[ChainedEnv]:
    """Serve ``emulator``; ``adapter_for(base_url)`` builds the adapter under test."""
    sleeps = Sleeps()
    async with EmulatorServer(emulator) as server, aiohttp.ClientSession() as session:
        transport = AiohttpTransport(session, retry=RetryPolicy(max_attempts=2), sleep=sleeps)
        adapter = adapter_for(server.base_url + type(emulator).API_PREFIXES[0])
        yield ChainedEnv(emulator, server, transport, adapter, sleeps, session,
                         defaults=defaults, auth=auth)


def cursor_defaults(model: Any, tools: tuple[Any, ...]) -> dict[str, Any]:
    """The call fields the durable tests start from: cursor strategy, a short system
    prompt, ``model`` and ``tools``."""
    return {"strategy": Strategy.CURSOR, "model": model, "system_prompt": "Be brief.",
            "tools": tools}
