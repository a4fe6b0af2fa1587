"""``POST /api/chats/{id}/turns``: one turn, streamed as server-sent events.

The request is checked in full before the engine is asked for anything. The engine's
first event is awaited before the response starts, so a missing chat (404) or a busy
one (409 ``chat_busy``) is a plain JSON answer given before any provider call. Then
every engine event goes out as one SSE event named by its ``type`` with the event as
JSON data; a comment line keeps an idle stream alive. If the client goes away, the
handler is cancelled (or its write fails) and closing the engine's iterator ends the
turn ``aborted`` with ``cancelled``, its lease released and nothing half-committed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web
from aiohttp_sse import sse_response

from turnstate.core._context import ContextSettings
from turnstate.core._events import TurnAborted, TurnCompleted, TurnEvent
from turnstate.engine import TurnInput
from turnstate.server._http import OWNER, reject
from turnstate.server._routes import read_json, services_of, text_field
from turnstate.server._services import Services
from turnstate.server._sse import SEND_TIMEOUT_SECONDS, EventWriter, TurnStream

ROUTES = web.RouteTableDef()


def turn_input(body: dict[str, Any], services: Services, owner: str) -> TurnInput:
    """The body as a ``TurnInput``, or a 400/413 naming the first field at fault."""
    limit = services.config.max_text_chars
    provider = body.get("provider")
    if not isinstance(provider, str) or provider not in services.providers():
        reject("provider", f"provider must be one of {services.providers()}")
    model = body.get("model")
    if not isinstance(model, str) or (provider, model) not in services.engine.registry.models:
        reject("model", f"unknown model for provider {provider!r}")
    prompt = text_field(body, "system_prompt", limit, required=False)
    text = text_field(body, "text", limit, required=True)
    names = body.get("tools", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) \
            or len(set(names)) != len(names):
        reject("tools", "tools must be a list of distinct tool names")
    unknown = [n for n in names if n not in services.tools]
    if unknown:
        reject("tools", f"unknown tools {unknown}; known: {sorted(services.tools)}")
    compaction = body.get("compaction", True)
    if not isinstance(compaction, bool):
        reject("compaction", "compaction must be true or false")
    return TurnInput(provider=provider, model=model, system_prompt=prompt, user_text=text,
                     tools=tuple(services.tools[n] for n in names), owner=owner,
                     context=ContextSettings(provider_compaction_enabled=compaction))


@ROUTES.post("/api/chats/{chat_id}/turns")
async def post_turn(request: web.Request) -> web.StreamResponse:
    services = services_of(request)
    turn = turn_input(await read_json(request), services, request[OWNER])
    events = aiter(services.engine.run_turn(request.match_info["chat_id"], turn))
    try:
        first = await anext(events)  # ChatNotFound / ChatBusy surface here, as JSON
    except BaseException:
        await events.aclose()  # type: ignore[attr-defined]
        raise
    task = asyncio.current_task()
    assert task is not None
    services.turn_tasks.add(task)
    services.metrics.streams.inc()
    started = time.perf_counter()
    final: TurnEvent | None = None
    try:
        async with sse_response(request, allow_all_methods=True, sep="\n",
                                send_timeout=SEND_TIMEOUT_SECONDS, response_cls=TurnStream,
                                ping_interval=services.config.heartbeat_seconds) as sse:
            writer = EventWriter(sse, request)
            try:
                async for event in _chain(first, events):
                    if isinstance(event, TurnCompleted | TurnAborted):
                        final = event
                        await writer.finish(event)  # the stream ends with the turn
                    else:
                        await writer.send(event)
                if final is None:
                    await writer.drain()
            finally:
                writer.cancel()
    finally:
        await events.aclose()  # type: ignore[attr-defined]  # ends an unfinished turn
        services.metrics.streams.dec()
        services.turn_tasks.discard(task)
        seconds = time.perf_counter() - started
        if isinstance(final, TurnCompleted | TurnAborted):
            services.metrics.turn_finished(turn.provider, final, seconds)
        else:
            services.metrics.turn_cancelled(seconds)
    return sse


async def _chain(first: TurnEvent, rest: AsyncIterator[TurnEvent]) -> AsyncIterator[TurnEvent]:
    yield first
    async for event in rest:
        yield event
