"""JSON errors and the middlewares: every failure is a JSON body, never a traceback.

``ApiError`` is what handlers raise for bad input; the error middleware also maps the
library's errors (``ChatNotFound`` → 404 ``not_found``, ``ChatBusy`` → 409 ``chat_busy``,
...) and aiohttp's own HTTP errors (413, 405, 404) to the same shape::

    {"error": "invalid_field", "field": "provider", "message": "unknown provider 'x'"}
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from aiohttp import web

from turnstate.core._errors import (
    ChatBusy,
    ChatNotFound,
    InvalidInput,
    MessageNotFound,
    TurnFinished,
    TurnNotFound,
    TurnstateError,
)
from turnstate.server._auth import TokenBook

_LOG = logging.getLogger("turnstate")  # the scrubbed logger (providers._scrub)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# The caller's owner, set by the auth middleware (a typed key where aiohttp has them).
OWNER: Any = web.RequestKey("owner", str) if hasattr(web, "RequestKey") else "turnstate.owner"


class ApiError(Exception):
    """A request the API refuses, with its status, error code and the field at fault."""

    def __init__(self, status: int, error: str, message: str, *, field: str | None = None,
                 extra: dict[str, Any] | None = None):
        super().__init__(message)
        self.status, self.error, self.field, self.message = status, error, field, message
        self.extra = extra or {}

    def response(self) -> web.Response:
        body: dict[str, Any] = {"error": self.error, "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        body.update(self.extra)
        return web.json_response(body, status=self.status)


def bad_field(field: str, message: str, *, status: int = 400) -> ApiError:
    return ApiError(status, "invalid_field", message, field=field)


def reject(field: str, message: str) -> NoReturn:
    """Refuse the request: 400 ``invalid_field`` naming ``field``."""
    raise bad_field(field, message)


NOT_FOUND = ApiError(404, "not_found", "no such chat")


def _http_error_code(exc: web.HTTPException) -> str:
    return {404: "no_route", 405: "method_not_allowed", 413: "body_too_large"}.get(
        exc.status, "http_error")


def _mapped(exc: Exception) -> ApiError | None:
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, ChatNotFound):
        return NOT_FOUND  # the same answer for a missing and for another owner's chat
    if isinstance(exc, TurnNotFound):  # unknown, another chat's, another owner's
        return ApiError(404, "not_found", "no such turn")
    if isinstance(exc, TurnFinished):
        return ApiError(409, "turn_finished", str(exc),
                        extra={"state": exc.state, "reason": exc.reason})
    if isinstance(exc, MessageNotFound):
        return ApiError(404, "message_not_found", f"no message {exc.seq}")
    if isinstance(exc, InvalidInput):  # the engine's own input checks
        field = "text" if exc.field == "user_text" else exc.field
        return ApiError(400, "invalid_field", exc.problem, field=field)
    if isinstance(exc, ChatBusy):
        return ApiError(409, "chat_busy", "another turn is running in this chat")
    if isinstance(exc, web.HTTPException) and exc.status >= 400:
        return ApiError(exc.status, _http_error_code(exc), exc.reason)
    return None


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except Exception as exc:
        mapped = _mapped(exc)
        if mapped is not None:
            return mapped.response()
        if isinstance(exc, web.HTTPException):
            raise
        kind = "storage" if isinstance(exc, TurnstateError) else "internal"
        _LOG.exception("request %s %s failed", request.method, request.path)
        return ApiError(500, f"{kind}_error", "the server could not do that").response()


def auth_middleware(tokens: TokenBook) -> Any:
    """Every ``/api`` route needs a valid bearer token; the owner goes on the request."""

    @web.middleware
    async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith("/api/") and request.method != "OPTIONS":
            owner = tokens.owner_for_header(request.headers.get("Authorization"))
            if owner is None:
                return web.json_response(
                    {"error": "unauthorized", "message": "a valid bearer token is required"},
                    status=401, headers={"WWW-Authenticate": 'Bearer realm="turnstate"'})
            request[OWNER] = owner
        return await handler(request)

    return auth


def cors_middleware(origin: str) -> Any:
    """Allow one origin (with the Authorization header); preflights answer 204."""
    allow = {"Access-Control-Allow-Origin": origin, "Vary": "Origin",
             "Access-Control-Allow-Headers": "Authorization, Content-Type",
             "Access-Control-Allow-Methods": "GET, POST, PATCH, DELETE, OPTIONS"}

    @web.middleware
    async def cors(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.headers.get("Origin") != origin:
            return await handler(request)
        if request.method == "OPTIONS":
            return web.Response(status=204, headers=allow)
        response = await handler(request)
        if not response.prepared:
            response.headers.update(allow)
        return response

    return cors
