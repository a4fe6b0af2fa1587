"""``POST /api/chats/{id}/turns``: one turn, streamed as server-sent events.

The request is checked in full before the engine is asked for anything. The engine's
first event is awaited before the response starts, so a missing chat (404) or a busy
one (409 ``chat_busy``) is a plain JSON answer given before any provider call. Then
every engine event goes out as one SSE event named by its ``type`` with the event as
JSON data; a comment line keeps an idle stream alive. If the client goes away, the
handler is cancelled (or its write fails) and closing the engine's iterator ends the
turn ``aborted`` with ``cancelled``, its lease released and nothing half-committed.
When the server stops, the shutdown cancels the handler the same way, but the client is
still there: the stream ends with a ``turn_aborted`` rebuilt from the recorded abort.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web
from aiohttp_sse import sse_response

from turnstate.core._context import ContextSettings
from turnstate.core._errors import TurnstateError
from turnstate.core._events import (
    ContinuationDegraded,
    ToolCallEvent,
    TurnAborted,
    TurnCompleted,
    TurnEvent,
    TurnStats,
)
from turnstate.engine import TurnInput
from turnstate.server._http import OWNER, reject
from turnstate.server._routes import read_json, services_of, text_field
from turnstate.server._services import Services
from turnstate.server._sse import SEND_TIMEOUT_SECONDS, EventWriter, TurnStream
from turnstate.storage import TurnStatus

ROUTES = web.RouteTableDef()
_LOG = logging.getLogger("turnstate")


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
                     turn_id=uuid.uuid4().hex,
                     tools=tuple(services.tools[n] for n in names), owner=owner,
                     context=ContextSettings(provider_compaction_enabled=compaction))


@ROUTES.post("/api/chats/{chat_id}/turns")
async def post_turn(request: web.Request) -> web.StreamResponse:
    services = services_of(request)
    turn = turn_input(await read_json(request), services, request[OWNER])
    chat_id = request.match_info["chat_id"]
    events = aiter(services.engine.run_turn(chat_id, turn))
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
            final = await _stream(EventWriter(sse, request), first, events,
                                  Stopping(services, chat_id, turn))
    finally:
        await events.aclose()  # type: ignore[attr-defined]  # ends an unfinished turn
        services.metrics.streams.dec()
        services.turn_tasks.discard(task)
        seconds = time.perf_counter() - started
        if isinstance(final, TurnCompleted | TurnAborted):
            services.metrics.turn_finished(turn.provider, final, seconds)
        else:
            services.metrics.turn_cancelled(seconds)
        _log_turn(turn, chat_id, final)
    return sse


def _log_turn(turn: TurnInput, chat_id: str, final: TurnEvent | None) -> None:
    """One line per turn: info when it completed, warning when it aborted for a reason
    other than its client going away (or the server stopping)."""
    if isinstance(final, TurnAborted) and final.reason != "cancelled":
        level, outcome, reason = logging.WARNING, "aborted", final.reason
    elif isinstance(final, TurnCompleted):
        level, outcome, reason = logging.INFO, "completed", None
    else:
        level, outcome, reason = logging.INFO, "cancelled", "cancelled"
    if _LOG.isEnabledFor(level):
        _LOG.log(level, "turn %s %s%s", turn.turn_id, outcome, f" ({reason})" if reason else "",
                 extra={"turn_id": turn.turn_id, "chat_id": chat_id, "owner": turn.owner,
                        "outcome": outcome, "reason": reason})


async def _stream(writer: EventWriter, first: TurnEvent, events: AsyncIterator[TurnEvent],
                  stopping: Stopping) -> TurnEvent | None:
    """Send every event; the final one ends the body. Returns the engine's final event.

    When the server stops (its shutdown cancels this task), the engine records the
    turn's abort but yields nothing more: the stream then ends with a ``turn_aborted``
    rebuilt from that record, instead of being cut.
    """
    try:
        async for event in _chain(first, events):
            if isinstance(event, TurnCompleted | TurnAborted):
                await writer.finish(event)
                return event
            stopping.saw(event)
            await writer.send(event)
        await writer.drain()
        return None
    except asyncio.CancelledError:
        if not stopping.services.stopping:
            raise  # the client went away: nobody to tell
        await events.aclose()  # type: ignore[attr-defined]  # records the abort if need be
        stopped = await stopping.final_event()
        if stopped is None:
            raise
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()  # this task was told to stop and did: its response ends cleanly
        await writer.finish(stopped)
        return None
    finally:
        writer.cancel()


class Stopping:
    """What a stream stopped by the shutdown ends with: the stored abort, as an event.

    It remembers what the stream showed (the degradation, the tool calls), since the
    engine, once cancelled, yields nothing more.
    """

    def __init__(self, services: Services, chat_id: str, turn: TurnInput) -> None:
        self.services, self.chat_id, self.turn = services, chat_id, turn
        self.degradation: str | None = None
        self.tool_calls = 0

    def saw(self, event: TurnEvent) -> None:
        if isinstance(event, ContinuationDegraded) and self.degradation is None:
            self.degradation = event.reason
        elif isinstance(event, ToolCallEvent):
            self.tool_calls += 1

    async def final_event(self) -> TurnAborted | None:
        """The ``turn_aborted`` of this turn from its stored record.

        Its ``stats`` count the tool calls the stream showed; the requests and bytes the
        turn sent are only known inside the engine, so they read 0. None when the turn
        is not recorded as aborted (its commit landed while it was being stopped).
        """
        try:
            records = await self.services.store.list_turns(self.chat_id, limit=1,
                                                           owner=self.turn.owner)
        except TurnstateError:
            return None
        record = next((r for r in records if r.id == self.turn.turn_id), None)
        if record is None or record.status is not TurnStatus.ABORTED:
            return None
        return TurnAborted(turn_id=record.id, chat_id=record.chat_id,
                           reason=record.reason or "cancelled", detail=record.detail,
                           strategy=record.strategy, degradation=self.degradation,
                           path=record.path, stats=TurnStats(tool_calls=self.tool_calls))


async def _chain(first: TurnEvent, rest: AsyncIterator[TurnEvent]) -> AsyncIterator[TurnEvent]:
    yield first
    async for event in rest:
        yield event
