"""The server's aiohttp runner: JSON errors for requests aiohttp's HTTP parser refuses.

A request line or header over aiohttp's limits (8190 bytes each: ``max_line_size``,
``max_field_size``), more than 128 headers, a broken chunked body or a request that is not
HTTP never reaches the application (no route, no middleware, no ``on_response_prepare``):
aiohttp answers it from its connection handler, plain text, with its own
``Server: Python/3.x aiohttp/3.x``. ``TurnstateRunner`` (what ``serve`` runs) answers those
as every other error, ``{"status", "error", "message"}`` with ``Server: turnstate``, and
still closes the connection. The status stays aiohttp's (400; 500 for a failure after the
request was read). aiohttp has no public hook for it: the connection handler's
``handle_error`` is overridden, through the runner's ``_make_server``.

The same handler bounds the time aiohttp takes to write the answer a handler returned
(a page file, a small JSON answer, an error; the streams and large answers are sent
inside their handlers, with their own limits): ``send_timeout`` plus the answer's size at
``MIN_SEND_BYTES_PER_SECOND``, then the connection is aborted. aiohttp writes it with no
limit, and a client that pipelines requests and reads nothing (a hundred
``GET /static/vendor/purify.es.js``, no token needed) held its connection for ever,
waiting in ``sendfile`` or in a write's ``drain`` (attack8).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import __version__, web
from aiohttp.http_exceptions import LineTooLong
from aiohttp.web_protocol import RequestHandler

from turnstate.server._http import ApiError
from turnstate.server._owner_limits import MIN_SEND_BYTES_PER_SECOND
from turnstate.server._sse import SEND_TIMEOUT_SECONDS

logger = logging.getLogger("turnstate")

SERVER_NAME = "turnstate"
"""Every answer's ``Server`` header: no versions (``_app._page_headers`` for routed ones)."""


def refusal(status: int, exc: BaseException | None) -> ApiError:
    """The JSON error for a request the connection handler refuses. The parser's own
    message is not echoed: it quotes the request (a too long line, 8 KB of a header)."""
    if status >= 500:
        return ApiError(status, "internal_error", "the server could not do that")
    if isinstance(exc, LineTooLong):
        limit = exc.args[1] if len(exc.args) > 1 else "the allowed"
        return ApiError(status, "header_too_large",
                        f"the request line or a header is longer than {limit} bytes")
    return ApiError(status, "bad_request", "the request is not valid HTTP/1.1 "
                    "(too many headers, a malformed line or a broken chunked body)")


class _JsonErrorsHandler(RequestHandler):
    send_timeout: float = SEND_TIMEOUT_SECONDS

    async def finish_response(self, request: web.BaseRequest, resp: web.StreamResponse,
                              start_time: float | None) -> tuple[web.StreamResponse, bool]:
        # aiohttp's writes the answer with no limit: a peer that takes none of it (its
        # pipelined answers fill the buffers) holds the connection for ever.
        within = asyncio.timeout(answer_seconds(resp, self.send_timeout))
        try:
            async with within:
                return await super().finish_response(request, resp, start_time)
        except TimeoutError:
            if not within.expired():
                raise
            if self.transport is not None:  # close() would wait for the peer to read
                self.transport.abort()
            return resp, True

    def handle_error(self, request: web.BaseRequest, status: int = 500,
                     exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        # aiohttp's: logs it (``_logging.MalformedRequests`` tames a parser's refusal),
        # raises when the answer had started; its plain-text answer is replaced.
        super().handle_error(request, status, exc, message)
        response = refusal(status, exc).response()
        response.headers["Server"] = SERVER_NAME
        response.force_close()
        return response


def answer_seconds(response: web.StreamResponse, send_timeout: float) -> float:
    """How long the peer is given to take an answer: ``send_timeout``, plus its length
    (when known before it is sent: a file's is not) at the slowest rate taken."""
    size = response.content_length or 0
    return send_timeout + size / MIN_SEND_BYTES_PER_SECOND


class _JsonErrorsServer(web.Server):
    send_timeout: float = SEND_TIMEOUT_SECONDS

    def __call__(self) -> RequestHandler:
        handler = _JsonErrorsHandler(self, loop=self._loop, **self._kwargs)
        handler.send_timeout = self.send_timeout
        return handler


class TurnstateRunner(web.AppRunner):
    """``web.AppRunner`` whose connections answer the parser's refusals in JSON and cut
    a peer that has not taken an answer within ``send_timeout`` (plus the answer's size
    at 32 KiB/s)."""

    def __init__(self, app: web.Application, *, send_timeout: float = SEND_TIMEOUT_SECONDS,
                 **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.send_timeout = send_timeout

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        try:  # aiohttp internals: a release that moves them keeps its plain-text answers
            served = _JsonErrorsServer(
                server.request_handler, request_factory=server.request_factory,
                handler_cancellation=server.handler_cancellation,
                loop=server._loop, **server._kwargs)
            served.send_timeout = self.send_timeout
            return served
        except (AttributeError, TypeError):
            logger.warning("aiohttp %s: its parser's refusals stay plain text", __version__)
            return server

