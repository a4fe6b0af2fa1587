"""What every provider emulator shares: faults, the request log, the scripted model, SSE.

An emulator is an aiohttp application that speaks one provider's real wire format. The
pieces here are protocol-neutral:

* ``FaultPlan``: faults queued by a test, each consumed by the next request (an HTTP
  status with a body, a 429 with ``Retry-After``, a stream cut after N events, a
  malformed frame after N events, a delay, or a gate a test opens).
* ``RecordedRequest``: a request received, API key redacted; ``RequestLog`` holds the
  most recent ones (``_request_log``).
* ``ScriptedModel``: a deterministic "model" that answers from the conversation,
  following directives written in the user's text (see ``Directive``).
* ``EmulatorBase.send_events``: writes SSE frames honouring the request's fault.
* ``EmulatorServer``: serves an app on a free loopback port.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
import secrets
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from aiohttp import web

from turnstate.core._json import JsonObject, compact_json

# The neutral conversation and the scripted model live in their own module; they are
# re-exported here, where every emulator imports them from.
from turnstate.emulators._conversation_model import (
    Directive,
    Item,
    Reply,
    ScriptedModel,
    append_item,
    append_parts,
    canonical_arguments,
    items_from_messages,
    pairing_problem,
    parse_directives,
    text_deltas,
)
from turnstate.emulators._faults import REDACTED_HEADERS, Fault, FaultPlan, RecordedRequest
from turnstate.emulators._forced import ScriptedCall, example_arguments
from turnstate.emulators._request_log import DEFAULT_BYTES, DEFAULT_CAPACITY, RequestLog
from turnstate.emulators._settings import wire_settings

__all__ = [
    "ChainedEmulator",
    "Directive",
    "EmulatorBase",
    "EmulatorServer",
    "Fault",
    "FaultPlan",
    "Item",
    "RecordedRequest",
    "RefusedRequest",
    "Reply",
    "RequestLog",
    "ScriptedCall",
    "ScriptedModel",
    "append_item",
    "append_parts",
    "canonical_arguments",
    "example_arguments",
    "items_from_messages",
    "pairing_problem",
    "parse_directives",
    "text_deltas",
]


LOG = logging.getLogger("turnstate")  # the scrubbed logger (tests/providers/test_scrub.py)

# --- serving ---------------------------------------------------------------------------


MAX_BODY_BYTES = 96 << 20
"""The largest request body an emulator reads (aiohttp's default is 1 MiB): a turn may
carry 20 MiB of inline images and files (``TurnLimits.max_inline_bytes``), about 27 MiB
as base64, plus its history; the real APIs take bodies of tens of megabytes (OpenAI
documents 50 MB of images a request, about 70 MB as base64: the OpenAI emulators refuse
past that with OpenAI's 400, not this 413; ``_openai_limits``)."""


class EmulatorBase:
    """Request log, fault plan, scripted model and SSE writing; subclasses add routes."""

    REQUEST_LOG_CAPACITY: ClassVar[int] = DEFAULT_CAPACITY
    REQUEST_LOG_BYTES: ClassVar[int] = DEFAULT_BYTES

    def __init__(self) -> None:
        self.faults = FaultPlan()
        self.stopping = asyncio.Event()
        self.requests = RequestLog(self.REQUEST_LOG_CAPACITY, self.REQUEST_LOG_BYTES)
        """The most recent requests received (``_request_log``: bounded by count and
        bytes; ``requests.total`` counts every one)."""
        self.model = ScriptedModel()
        self.token_ratio = 1.0
        """How many of this emulator's tokens one token of the four-characters rule
        (turnstate's estimate) is: 2.0 counts a chat whose text tokenises twice as densely
        (CJK, code, base64-like text), in the windows the emulator enforces and in the
        input usage it reports."""

    def scaled(self, tokens: int) -> int:
        """``tokens`` of the four-characters rule as this emulator counts them."""
        return tokens if self.token_ratio == 1.0 else math.ceil(tokens * self.token_ratio)

    def app(self) -> web.Application:
        """The aiohttp application; subclasses override ``routes``."""
        application = web.Application(client_max_size=MAX_BODY_BYTES)
        application.add_routes(self.routes())
        return application

    def routes(self) -> list[web.RouteDef]:
        raise NotImplementedError

    async def record(self, request: web.Request) -> RecordedRequest:
        body = await request.read()
        try:
            decoded = json.loads(body) if body else None
        except ValueError:
            decoded = None
        headers = {
            k.lower(): ("<redacted>" if k.lower() in REDACTED_HEADERS else v)
            for k, v in request.headers.items()
        }
        recorded = RecordedRequest(method=request.method, path=request.path, headers=headers,
                                   body=body, json=decoded)
        self.requests.append(recorded)
        return recorded

    async def apply_fault(self, request: web.Request) -> tuple[Fault | None, web.Response | None]:
        """Take the request's fault; an HTTP-status fault becomes the response."""
        fault = self.faults.take(request.path, request.headers)
        if fault is None:
            return None, None
        fault = fault.echoed(request)
        if fault.gate is not None:
            await fault.gate.wait()
        if fault.delay:
            await asyncio.sleep(fault.delay)
        if fault.status is None:
            return fault, None
        body = fault.body if isinstance(fault.body, str) else compact_json(fault.body or {})
        return fault, web.Response(status=fault.status, text=body,
                                   content_type=fault.content_type, headers=fault.headers)

    async def send_events(
        self,
        request: web.Request,
        events: Sequence[tuple[str | None, str]],
        fault: Fault | None,
    ) -> web.StreamResponse:
        """Stream ``(event name, data)`` pairs as SSE, applying cut and malformed faults.

        A client that goes away mid-stream (its write fails) ends the stream quietly: one
        DEBUG line on ``turnstate``, no traceback, as a real API takes a cancelled request. Under
        ``EmulatorServer`` aiohttp cancels the handler; an embedder serving ``app()`` in
        its own runner (``handler_cancellation`` off, aiohttp's default) sees the failed
        write instead, which aiohttp logged as an ERROR traceback."""
        response = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        try:
            await self._write_events(request, response, events, fault)
        except ConnectionError as error:  # aiohttp's ClientConnectionResetError included
            LOG.debug("emulator: client went away mid-stream on %s (%s)", request.path,
                      type(error).__name__)
        return response

    async def _write_events(self, request: web.Request, response: web.StreamResponse,
                            events: Sequence[tuple[str | None, str]],
                            fault: Fault | None) -> None:
        await response.prepare(request)
        for index, (name, data) in enumerate(events):
            if fault and fault.frame_after == index:
                await response.write(fault.frame.encode("utf-8"))
                await response.write_eof()
                return
            if fault and fault.stall_after == index:
                await self.stopping.wait()  # the server's close ends every stalled stream
                return
            if fault and fault.malformed_after is not None and index == fault.malformed_after:
                await response.write(b'data: {"type": "broken", \n\n')
                return
            if fault and fault.cut_after is not None and index == fault.cut_after:
                # Drop the connection mid-stream, as a network failure would.
                if request.transport is not None:
                    request.transport.close()
                return
            frame = (f"event: {name}\n" if name else "") + f"data: {data}\n\n"
            await response.write(frame.encode("utf-8"))
        await response.write_eof()


class RefusedRequest(Exception):
    """A request the emulated API refuses; ``response()`` is the real error response."""

    def __init__(self, status: int, body: JsonObject, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = body

    def response(self) -> web.Response:
        return web.json_response(self.body, status=self.status)


class ChainedEmulator(EmulatorBase):
    """An emulator of a provider that keeps conversations server-side, chained by id.

    ``chains`` maps each stored id to an object with a ``conversation`` (neutral items)
    and the ``body`` retrieve answers with; the test API (``conversation_for``,
    ``stored``, ``expire``, ``evict_all``) and the create, retrieve and delete endpoints
    under each of ``API_PREFIXES`` + ``/`` + ``RESOURCE`` are the same for every durable
    provider. Subclasses give the wire: ``STREAM_EVENTS`` and the protocol steps below.
    """

    API_PREFIXES: ClassVar[tuple[str, ...]]
    RESOURCE: ClassVar[str]
    STREAM_EVENTS: ClassVar[Callable[[JsonObject], list[tuple[str | None, str]]]]

    def __init__(self) -> None:
        super().__init__()
        self.chains: dict[str, Any] = {}
        self._expired: set[str] = set()
        self._counters: dict[str, itertools.count[int]] = {}
        # Stored ids carry a random tag per emulator: two processes (two nodes, each with
        # its own emulator) never hand out the same id for different conversations.
        self.id_tag = secrets.token_hex(4)

    def conversation_for(self, cursor: str) -> list[Item]:
        """The neutral conversation ``cursor`` stands for (expired ones included).

        Raises:
            KeyError: nothing was ever stored under this id.
        """
        return list(self.chains[cursor].conversation)

    def stored(self, cursor: str) -> bool:
        """True while ``cursor`` can be chained on."""
        return cursor in self.chains and cursor not in self._expired

    def expire(self, cursor: str) -> None:
        """Forget ``cursor``, as the provider does after its retention period."""
        self._expired.add(cursor)

    def evict_all(self) -> None:
        """Everything stored expires at once."""
        self._expired.update(self.chains)

    def next_number(self, name: str) -> int:
        """1, 2, 3, ... per ``name``: deterministic ids."""
        return next(self._counters.setdefault(name, itertools.count(1)))

    def routes(self) -> list[web.RouteDef]:
        routes: list[web.RouteDef] = []
        for prefix in self.API_PREFIXES:
            collection = f"{prefix}/{self.RESOURCE}"
            routes += [
                web.post(collection, self._create),
                web.get(collection + "/{chain_id}", self._retrieve),
                web.delete(collection + "/{chain_id}", self._delete),
            ]
        return routes

    async def _retrieve(self, request: web.Request) -> web.Response:
        """The stored body, or the provider's 404 for an unknown or expired id."""
        await self.record(request)
        chain_id = request.match_info["chain_id"]
        if not self.stored(chain_id):
            return self._unknown(chain_id)
        return web.json_response(self.chains[chain_id].body)

    async def _delete(self, request: web.Request) -> web.Response:
        """Expire a stored id (retrieve and chaining on it fail from then on)."""
        await self.record(request)
        chain_id = request.match_info["chain_id"]
        if not self.stored(chain_id):
            return self._unknown(chain_id)
        self.expire(chain_id)
        return web.json_response(self._deleted(chain_id))

    async def _create(self, request: web.Request) -> web.StreamResponse:
        """The create endpoint: record, apply the fault, check, answer (streamed or not)."""
        recorded = await self.record(request)
        fault, faulted = await self.apply_fault(request)
        if faulted is not None:
            return faulted
        try:
            self._check_auth(request)
            turn = self._prepare(recorded)
        except RefusedRequest as error:
            return error.response()
        reply = self.model.respond(turn.conversation, turn.tools, wire_settings(turn.body))
        body = self._respond(turn, reply)
        if turn.body.get("stream") is True:
            # Through the class: a function kept as a class attribute is not a method.
            events = type(self).STREAM_EVENTS(body)
            return await self.send_events(request, events, fault)
        return web.json_response(body)

    # The protocol-specific steps of ``_create``.
    def _check_auth(self, request: web.Request) -> None:
        raise NotImplementedError

    def _prepare(self, recorded: RecordedRequest) -> Any:
        raise NotImplementedError

    def _respond(self, turn: Any, reply: Reply) -> JsonObject:
        raise NotImplementedError

    def _unknown(self, chain_id: str) -> web.Response:
        """The provider's answer to retrieving or deleting an id it does not keep."""
        raise NotImplementedError

    def _deleted(self, chain_id: str) -> JsonObject:
        """The provider's answer to a delete."""
        raise NotImplementedError


class EmulatorServer:
    """Serves an emulator on 127.0.0.1 (a free port unless one is given)."""

    def __init__(self, emulator: EmulatorBase, *, port: int = 0) -> None:
        self.emulator = emulator
        self._port = port
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> EmulatorServer:
        # A client that goes away cancels its request, as at a real provider (and a
        # stalled fault then never holds up shutdown).
        self._runner = web.AppRunner(self.emulator.app(), access_log=None,
                                     handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self._port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def close(self) -> None:
        self.emulator.stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> EmulatorServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
