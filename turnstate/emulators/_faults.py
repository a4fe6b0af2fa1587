"""What an emulator's tests script and read: the faults it injects (a status, a body, a cut
stream, a delay, matched on path and headers) in a plan, and the requests it recorded."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Mapping
from typing import Any

import attrs
from aiohttp import web

from turnstate.core._json import JsonObject, compact_json

REDACTED_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key", "api-key"})


@attrs.frozen(kw_only=True)
class Fault:
    """One injected fault, applied to the next request the emulator receives.

    Attributes:
        status: answer with this HTTP status and ``body`` instead of the real reply.
        body: the error body (a JSON object, or raw text).
        headers: extra response headers (``Retry-After`` for a 429).
        cut_after: stream only the first N events, then drop the connection.
        malformed_after: after N events, send one frame whose data is not JSON.
        delay: seconds to wait before answering (manual runs and the demo).
        gate: wait until this event is set before answering (deterministic tests).
        path_contains: apply only to a request whose path contains this text.
        frame_after: after N events, send ``frame`` (raw SSE text) and end the stream;
            an in-stream error event, a garbage frame, an HTML page in a 200.
        frame: the raw text ``frame_after`` sends.
        content_type: of a ``status`` answer (``text/html`` for a proxy's error page).
        stall_after: after N events, send nothing more and keep the connection open
            until the server closes.
        echo_credentials: replace ``$CREDENTIALS`` in ``body``, ``frame`` and header
            values with the request's own auth header values, as a careless server
            echoing the request would.
        header: ``(name, value)``: apply only to a request carrying this header with
            this value (the reference server scopes an owner's faults so).
    """

    status: int | None = None
    body: JsonObject | str | None = None
    headers: Mapping[str, str] = attrs.field(factory=dict)
    cut_after: int | None = None
    malformed_after: int | None = None
    delay: float = 0.0
    gate: asyncio.Event | None = attrs.field(default=None, eq=False)
    path_contains: str | None = None
    frame_after: int | None = None
    frame: str = ""
    stall_after: int | None = None
    echo_credentials: bool = False
    content_type: str = "application/json"
    header: tuple[str, str] | None = None

    def matches(self, path: str, headers: Mapping[str, str]) -> bool:
        if self.path_contains is not None and self.path_contains not in path:
            return False
        return self.header is None or headers.get(self.header[0]) == self.header[1]

    def echoed(self, request: web.Request) -> Fault:
        """This fault with ``$CREDENTIALS`` replaced by the request's auth header values."""
        if not self.echo_credentials:
            return self
        secret = " ".join(v for k, v in request.headers.items()
                          if k.lower() in REDACTED_HEADERS)

        def fill(text: str) -> str:
            return text.replace("$CREDENTIALS", secret)

        body = self.body if not isinstance(self.body, str) else fill(self.body)
        if isinstance(self.body, dict):
            body = json.loads(fill(compact_json(self.body)))
        return attrs.evolve(self, body=body, frame=fill(self.frame),
                            headers={k: fill(v) for k, v in self.headers.items()})

    @classmethod
    def rate_limited(cls, retry_after: float = 1.0, body: JsonObject | None = None) -> Fault:
        return cls(status=429, headers={"Retry-After": f"{retry_after:g}"},
                   body=body or {"error": {"message": "Rate limit reached", "type": "requests",
                                           "code": "rate_limit_exceeded", "param": None}})


class FaultPlan:
    """Faults queued by a test, consumed in order by the requests that match them."""

    def __init__(self) -> None:
        self._queue: deque[Fault] = deque()

    def push(self, *faults: Fault) -> None:
        self._queue.extend(faults)

    def clear(self) -> None:
        self._queue.clear()

    def take(self, path: str, headers: Mapping[str, str] | None = None) -> Fault | None:
        """The first queued fault for a request to ``path`` with ``headers`` (removed)."""
        for index, fault in enumerate(self._queue):
            if fault.matches(path, headers or {}):
                del self._queue[index]
                return fault
        return None

    def pending(self, header: tuple[str, str]) -> int:
        """How many queued faults are scoped to ``header``."""
        return sum(1 for fault in self._queue if fault.header == header)

    def __len__(self) -> int:
        return len(self._queue)


@attrs.frozen(kw_only=True)
class RecordedRequest:
    """A request as received. ``json`` is the decoded body (None when it was not JSON)."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes
    json: Any

    @property
    def size(self) -> int:
        return len(self.body)
