"""JSON errors and the middlewares: every failure is a JSON body, never a traceback.

``ApiError`` is what handlers raise for bad input; the error middleware also maps the
library's errors (``ChatNotFound`` → 404 ``not_found``, ``ChatBusy`` → 409 ``chat_busy``,
...) and aiohttp's own HTTP errors (413, 405, 404) to the same shape::

    {"status": 400, "error": "invalid_field", "field": "provider",
     "message": "unknown provider 'x'"}
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NoReturn

from aiohttp import HttpVersion11, web
from aiohttp.web_urldispatcher import MatchInfoError, UrlMappingMatchInfo

from turnstate.core._errors import (
    ChatBusy,
    ChatLimitReached,
    ChatNotFound,
    InvalidInput,
    MessageNotFound,
    StorageQuotaExceeded,
    TurnFinished,
    TurnNotFound,
)
from turnstate.core._errors_storage import STORAGE_OUTAGES
from turnstate.server._auth import TokenBook

_LOG = logging.getLogger("turnstate")  # the scrubbed logger (providers._scrub)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# The caller's owner, set by the auth middleware (a typed key where aiohttp has them).
OWNER: Any = web.RequestKey("owner", str) if hasattr(web, "RequestKey") else "turnstate.owner"


class ApiError(Exception):
    """A request the API refuses, with its status, error code and the field at fault."""

    def __init__(self, status: int, error: str, message: str, *, field: str | None = None,
                 extra: dict[str, Any] | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.error, self.field, self.message = status, error, field, message
        self.extra, self.headers = extra or {}, headers

    def response(self) -> web.Response:
        body: dict[str, Any] = {"status": self.status, "error": self.error,
                                "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        body.update(self.extra)
        return web.json_response(body, status=self.status, headers=self.headers)


def bad_field(field: str, message: str, *, status: int = 400) -> ApiError:
    return ApiError(status, "invalid_field", message, field=field)


def reject(field: str, message: str) -> NoReturn:
    """Refuse the request: 400 ``invalid_field`` naming ``field``."""
    raise bad_field(field, message)


NOT_FOUND = ApiError(404, "not_found", "no such chat")
RETRY_AFTER_SECONDS = 2


def _http_error_code(exc: web.HTTPException) -> str:
    return {403: "forbidden", 404: "no_route", 405: "method_not_allowed",
            413: "body_too_large"}.get(
        exc.status, "http_error")


def _http_error_message(request: web.Request, exc: web.HTTPException) -> str:
    """What a 404 or 405 of the router means to the caller (aiohttp's reason else)."""
    path = request.path if len(request.path) <= 200 else request.path[:200] + "..."
    if exc.status == 404:
        return f"no route {request.method} {path}: see docs/server.md for the API"
    if exc.status == 403:  # a folder of the page's files
        return f"{path} is a folder: name one of its files"
    allow = exc.headers.get("Allow")
    if exc.status == 405 and allow:
        *others, last = [m.strip() for m in allow.split(",")]
        methods = f"{', '.join(others)} or {last}" if others else last
        return f"{path} takes {methods}, not {request.method}"
    return exc.reason


def _mapped(exc: Exception, request: web.Request) -> ApiError | None:
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
    if isinstance(exc, ChatLimitReached):
        return ApiError(409, "too_many_chats",
                        f"you have {exc.limit} chats, the most allowed: delete one first",
                        extra={"limit": exc.limit})
    if isinstance(exc, StorageQuotaExceeded):  # refused in the write: nothing stored
        return ApiError(409, "storage_quota_exceeded", "your chats hold the most data "
                        "allowed: delete chats or messages to make room")
    if isinstance(exc, web.HTTPException) and exc.status >= 400:
        allow = exc.headers.get("Allow")  # a 405 names the methods the path takes
        return ApiError(exc.status, _http_error_code(exc), _http_error_message(request, exc),
                        headers=None if allow is None else {"Allow": allow})
    return None


async def _answer_and_close(request: web.Request, response: web.Response) -> web.Response:
    """Send the answer, then close the connection: the rest of the body (late, or too
    large) is not worth waiting for (aiohttp would linger reading it)."""
    response.force_close()
    await response.prepare(request)
    await response.write_eof()
    if request.transport is not None:
        request.transport.close()
    return response


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except Exception as exc:
        mapped = _mapped(exc, request)
        if mapped is not None:
            response = mapped.response()
            if mapped.status in {408, 413}:
                return await _answer_and_close(request, response)
            return response
        if isinstance(exc, web.HTTPException):
            raise
        log_failure(request, exc)
        if isinstance(exc, STORAGE_OUTAGES):
            response = ApiError(503, "storage_unavailable",
                                "the database is not answering; try again shortly").response()
            response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
            return response
        return ApiError(500, "internal_error", "the server could not do that").response()


def log_failure(request: web.Request, exc: Exception) -> None:
    """Log why a request failed: a storage outage in a line, anything else with its
    traceback; both with the chat id the path names."""
    chat_id = request.match_info.get("chat_id")
    if isinstance(exc, STORAGE_OUTAGES):
        _LOG.error("request %s %s: storage unavailable: %s", request.method,
                   request.path, exc, extra={"chat_id": chat_id})
    else:
        _LOG.error("request %s %s failed", request.method, request.path, exc_info=exc,
                   extra={"chat_id": chat_id})


def cut_stream(request: web.Request, exc: Exception) -> None:
    """A stream that failed after its headers went out: no other answer can follow them
    (one would be written into the body), so the cause is logged and the connection
    closed mid-body, which a client reads as a dropped stream (and resumes from the last
    event id it saw). A client that left is no failure: nothing is logged for it."""
    if not isinstance(exc, ConnectionError):
        log_failure(request, exc)
    if request.transport is not None:
        request.transport.close()


def _guarded(request: web.Request) -> bool:
    """Whether the request needs a bearer token: every ``/api`` route but a preflight."""
    return request.path.startswith("/api/") and request.method != "OPTIONS"


def _owner_of(tokens: TokenBook, request: web.Request) -> str | None:
    """The owner of the one ``Authorization`` header (with two, a proxy in front may
    have read the other: none)."""
    given = request.headers.getall("Authorization", [])
    return tokens.owner_for_header(given[0]) if len(given) == 1 else None


def _unauthorized() -> web.Response:
    return web.json_response(
        {"status": 401, "error": "unauthorized",
         "message": "a valid bearer token is required: send Authorization: Bearer TOKEN"},
        status=401, headers={"WWW-Authenticate": 'Bearer realm="turnstate"'})


def auth_middleware(tokens: TokenBook) -> Any:
    """Every ``/api`` route needs a valid bearer token, in one ``Authorization`` header
    (with two, a proxy in front may have read the other); the owner goes on the request."""

    @web.middleware
    async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        if _guarded(request):
            owner = _owner_of(tokens, request)
            if owner is None:
                return _unauthorized()
            request[OWNER] = owner
        return await handler(request)

    return auth


ExpectHandler = Callable[[web.Request], Awaitable[web.StreamResponse | None]]


def expect_handler(tokens: TokenBook, limit_of: Callable[[web.Request], int]) -> ExpectHandler:
    """A route's answer to ``Expect: 100-continue``: the 401 (no valid token) or the 413
    (a ``Content-Length`` over ``limit_of(request)``, the route's body limit) the request
    would get, sent instead of ``100 Continue`` and with the connection closed, so the
    client never uploads a body that is refused unread; else aiohttp's own answer
    (``100 Continue``, or 417 for another expectation). aiohttp calls it before the
    middlewares, and uses a response it returns as the request's."""

    async def expect(request: web.Request) -> web.StreamResponse | None:
        if _guarded(request) and _owner_of(tokens, request) is None:
            return await _answer_and_close(request, _unauthorized())
        limit = limit_of(request)
        if (request.content_length or 0) > limit:
            return await _answer_and_close(request, body_too_large(limit).response())
        await _continue(request)
        return None

    return expect


class _Unrouted(MatchInfoError):
    """A path no route takes (404) or a method its route does not (405), answering
    ``Expect: 100-continue`` with its 401 or its own 404/405 rather than aiohttp's
    ``100 Continue``: the client never uploads a body that no handler reads."""

    def __init__(self, refusal: web.HTTPException, tokens: TokenBook) -> None:
        super().__init__(refusal)
        self._tokens = tokens

    @property
    def expect_handler(self) -> ExpectHandler:
        return self._refuse

    async def _refuse(self, request: web.Request) -> web.StreamResponse:
        if _guarded(request) and _owner_of(self._tokens, request) is None:
            return await _answer_and_close(request, _unauthorized())
        mapped = _mapped(self.http_exception, request)
        assert mapped is not None  # an HTTP error of status >= 400
        return await _answer_and_close(request, mapped.response())


def refuse_unrouted_expect(router: web.UrlDispatcher, tokens: TokenBook) -> None:
    """Make ``router`` answer an unrouted request's ``Expect`` itself (``_Unrouted``):
    aiohttp gives a 404 or 405 the default expect handler, which sends ``100 Continue``,
    and takes no router of ours (``Application(router=...)`` is deprecated)."""
    resolve = router.resolve

    async def resolving(request: web.Request) -> UrlMappingMatchInfo:
        found = await resolve(request)
        if isinstance(found, MatchInfoError) and not isinstance(found, _Unrouted):
            return _Unrouted(found.http_exception, tokens)
        return found

    router.resolve = resolving  # type: ignore[method-assign]


def static_expect(directory: Path) -> ExpectHandler:
    """The static files' answer to ``Expect: 100-continue``: the 404 a missing file gets
    (the connection closed, as an unrouted path's), else aiohttp's own answer. aiohttp's
    default invited the body of a request for a file that is not there."""
    root = directory.resolve()

    async def expect(request: web.Request) -> web.StreamResponse | None:
        try:
            found = (root / request.match_info.get("filename", "")).resolve(strict=True)
            outside = not found.is_relative_to(root)
        except (OSError, ValueError, RuntimeError):  # missing, a bad name, a symlink loop
            found, outside = root / "\0", True
        if outside or not found.is_file():  # a folder is aiohttp's 403, as without Expect
            refused = web.HTTPForbidden() if not outside and found.is_dir() \
                else web.HTTPNotFound()
            refusal = _mapped(refused, request)
            assert refusal is not None  # an HTTP error of status >= 400
            return await _answer_and_close(request, refusal.response())
        await _continue(request)
        return None

    return expect


async def _continue(request: web.Request) -> None:
    """aiohttp's default answer: ``100 Continue`` to HTTP/1.1's ``100-continue``, 417
    to another expectation (nothing for HTTP/1.0, which has no interim answers)."""
    if request.version != HttpVersion11:
        return
    expect = request.headers.get("Expect", "")
    if expect.lower() != "100-continue":
        raise web.HTTPExpectationFailed(text=f"Unknown Expect: {expect}")
    await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    request.writer.output_size = 0  # the answer's own bytes are counted from here


MAX_JSON_VALUES = 200_000
"""The most commas and opening brackets a JSON body may hold (an upper bound of its
values: each value but an object's or array's first follows a comma)."""


def crowded_json(raw: bytes) -> ApiError | None:
    """400 ``invalid_json`` for a body with more than ``MAX_JSON_VALUES`` commas and
    opening brackets, counted before it is parsed (C-speed counts, and only for bodies
    longer than the bound). A turn's 28 MiB of ``{},`` parsed into 9 M dicts: 650 MiB and
    3 s of the event loop, kept for as long as the turn's stream ran. Commas in text
    count too: 200,000 is a hundred times what a turn's parts and settings hold, and more
    than a question's 100,000 characters can."""
    if len(raw) <= MAX_JSON_VALUES:
        return None
    if raw.count(b",") + raw.count(b"[") + raw.count(b"{") <= MAX_JSON_VALUES:
        return None
    return ApiError(400, "invalid_json", f"the body holds more than {MAX_JSON_VALUES:,} "
                    "values (commas and brackets counted)")


def body_too_large(limit: int) -> ApiError:
    """413 ``body_too_large``: the body is over ``limit`` bytes."""
    return ApiError(413, "body_too_large", f"the body is larger than {limit} bytes")


def _cors_headers(origin: str) -> dict[str, str]:
    """What the allowed origin's scripts may send and read: a resume's ``Last-Event-ID``
    header, a turn's ``Idempotency-Key``, an edit's or delete's ``If-Match`` (places11),
    its ``X-Turn-Id`` and ``Idempotent-Replayed`` (``_replay``) and a 503's ``Retry-After``
    among them."""
    return {"Access-Control-Allow-Origin": origin, "Vary": "Origin",
            "Access-Control-Allow-Headers": "Authorization, Content-Type, Last-Event-ID, "
                                            "Idempotency-Key, If-Match",
            "Access-Control-Allow-Methods": "GET, POST, PATCH, DELETE, OPTIONS",
            "Access-Control-Expose-Headers": "X-Turn-Id, Retry-After, Idempotent-Replayed"}


def cors_middleware(origin: str) -> Any:
    """Preflights from the one allowed origin answer 204 (``cors_prepare`` decorates the
    other answers, streams included)."""
    allow = _cors_headers(origin)

    @web.middleware
    async def cors(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "OPTIONS" and request.headers.get("Origin") == origin:
            return web.Response(status=204, headers=allow)
        return await handler(request)

    return cors


def cors_prepare(origin: str) -> Callable[[web.Request, web.StreamResponse],
                                          Awaitable[None]]:
    """An ``on_response_prepare`` hook: every response to the allowed origin carries the
    CORS headers, an SSE stream too (a middleware sees it only after it started)."""
    allow = _cors_headers(origin)

    async def decorate(request: web.Request, response: web.StreamResponse) -> None:
        if request.headers.get("Origin") == origin:
            response.headers.update(allow)

    return decorate


UNGUARDED = frozenset({"/healthz", "/metrics"})
"""The routes without a token, which ``--allowed-host`` guards against DNS rebinding."""


def host_middleware(allowed: frozenset[str]) -> Any:
    """``/healthz`` and ``/metrics`` answer only requests whose ``Host`` is allowed."""

    @web.middleware
    async def hosts(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in UNGUARDED:
            host = (request.host or "").lower()
            name = host[1:host.find("]")] if host.startswith("[") else host.rsplit(":", 1)[0]
            if name not in allowed:
                raise ApiError(421, "host_not_allowed", "this Host is not served here")
        return await handler(request)

    return hosts
