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
"""

from __future__ import annotations

import logging

from aiohttp import __version__, web
from aiohttp.http_exceptions import LineTooLong
from aiohttp.web_protocol import RequestHandler

from turnstate.server._http import ApiError

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


class _JsonErrorsServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _JsonErrorsHandler(self, loop=self._loop, **self._kwargs)


class TurnstateRunner(web.AppRunner):
    """``web.AppRunner`` whose connections answer the parser's refusals in JSON."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        try:  # aiohttp internals: a release that moves them keeps its plain-text answers
            return _JsonErrorsServer(
                server.request_handler, request_factory=server.request_factory,
                handler_cancellation=server.handler_cancellation,
                loop=server._loop, **server._kwargs)
        except (AttributeError, TypeError):
            logger.warning("aiohttp %s: its parser's refusals stay plain text", __version__)
            return server

