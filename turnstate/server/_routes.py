"""Chats and messages: create, list (paginated), view, edit, delete; health and metrics.

Every ``/api`` handler passes the caller's owner to the store, so another owner's chat
is ``ChatNotFound`` (404 ``not_found``) exactly as a missing one.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
import unicodedata
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError

from turnstate.core import FilePart, ImagePart
from turnstate.core._conversation import Role, TextPart
from turnstate.core._errors import MessageChanged, MessageNotFound
from turnstate.core._text import first_lone_surrogate
from turnstate.server._http import (
    OWNER,
    ApiError,
    bad_field,
    body_too_large,
    crowded_json,
    reject,
)
from turnstate.server._if_match import (
    check_place,
    expected,
    message_at,
    refused_late,
    wanted_tags,
)
from turnstate.server._services import SERVICES, Services
from turnstate.server._titles import title_field
from turnstate.server._views import (
    MESSAGE_PAGE,
    TITLE_MESSAGES,
    MessagePage,
    chat_detail,
    chat_summary,
    meter_settled,
    model_limits,
)
from turnstate.storage import ChatPosition, ChatRecord, ExpectedMessage
from turnstate.storage._chat_search import MAX_QUERY_CHARS
from turnstate.storage._lean import lean_message

ROUTES = web.RouteTableDef()
MAX_PAGE = 100


def services_of(request: web.Request) -> Services:
    return request.app[SERVICES]


async def read_json(request: web.Request, limit: int | None = None) -> dict[str, Any]:
    """The body as a JSON object (413 over ``limit``, by default the configured
    ``max_body_bytes``; 400 when it is not a JSON object)."""
    config = services_of(request).config
    limit = config.max_body_bytes if limit is None else limit
    if (request.content_length or 0) > limit:  # refused before reading
        raise body_too_large(limit)
    try:
        raw = await _body(request, limit, config.read_timeout_seconds)
    except RequestPayloadError as exc:  # not what its Content-Encoding says (gzip, deflate)
        raise ApiError(400, "invalid_body", f"the body could not be read: {_reason(exc)}") \
            from None
    if len(raw) > limit:  # a chunked body has no Content-Length to refuse it by
        raise body_too_large(limit)
    crowded = crowded_json(raw)
    if crowded is not None:
        raise crowded
    try:
        text = raw.decode(json.detect_encoding(raw), "surrogatepass") if raw else "{}"
        del raw  # the raw body is not held beside its text and the parsed value (memory7)
        body = json.loads(text)  # what ``json.loads(raw)`` does, its copies one at a time
        del text
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "invalid_json", "the body is not JSON") from None
    except RecursionError:  # nested deeper than the parser's stack
        raise ApiError(400, "invalid_json", "the body is nested too deeply") from None
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_json", "the body must be a JSON object")
    return body


async def _body(request: web.Request, limit: int, seconds: float) -> bytes:
    if request.content.is_eof():  # the whole body has arrived: reading cannot wait
        return await request.content.read()  # not kept on the request (``read`` keeps
        # it, and a turn's handler holds its request until the turn ends)
    try:
        async with asyncio.timeout(seconds):
            return await _read_at_most(request, limit)
    except TimeoutError:
        raise ApiError(408, "body_timeout", "the body did not arrive in time") from None


def _reason(exc: RequestPayloadError) -> str:
    """aiohttp's words for a body it could not decode (``Can not decode
    content-encoding: gzip``), from the parser's error the payload error wraps."""
    cause = exc.__cause__
    return str(getattr(cause, "message", None) or exc).strip().splitlines()[-1].strip()


async def _read_at_most(request: web.Request, limit: int) -> bytes:
    """The body as it arrives, refused (413) as soon as it passes ``limit``: a chunked
    body has no length to refuse it by, and ``request.read`` would first hold up to
    ``client_max_size`` (the turn routes' 28 MiB) of it for a route that takes 1 MiB."""
    chunks: list[bytes] = []
    size = 0
    while chunk := await request.content.readany():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, "body_too_large", f"the body is larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def text_field(body: dict[str, Any], name: str, limit: int, *, required: bool) -> str:
    value = body.get(name, None if required else "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise bad_field(name, f"{name} must be a non-empty string" if required
                        else f"{name} must be a string")
    if len(value) > limit:
        raise ApiError(413, "text_too_long", f"{name} is longer than {limit} characters",
                       field=name)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise bad_field(name, f"{name} is not valid Unicode text") from None
    return value


def chat_id_field(body: dict[str, Any], name: str) -> str:
    """A chat id named in a body: a non-empty string with a UTF-8 form (JSON's
    ``\\ud800`` escape gives a lone surrogate, which no store can look up)."""
    value = body.get(name)
    if not isinstance(value, str) or not value or first_lone_surrogate(value) is not None:
        reject(name, f"{name} must be a chat's id (create one with POST /api/chats)")
    return value


@ROUTES.get("/api/config")
async def get_config(request: web.Request) -> web.Response:
    """What the page needs to draw its pickers: providers, models, tools, limits."""
    services = services_of(request)
    registry = services.engine.registry
    providers = [{"name": name, "durable": registry.provider(name).durable,
                  "models": [{"name": model, "contextLimit": info.context_limit,
                              **model_limits(registry.provider(name), info)}
                             for (provider, model), info in registry.models.items()
                             if provider == name]}
                 for name in services.providers()]
    return web.json_response({
        "owner": request[OWNER], "providers": providers, "emulated": services.emulators
        is not None,
        "tools": [{"name": t.spec.name, "description": t.spec.description}
                  for t in services.tools.values()],
        "limits": {"maxTextChars": services.config.max_text_chars,
                   "maxBodyBytes": services.config.max_body_bytes,
                   "maxContentBytes": services.config.max_content_bytes,
                   "maxInlineBytes": services.engine.limits.max_inline_bytes},
    })


@ROUTES.post("/api/chats")
async def create_chat(request: web.Request) -> web.Response:
    """A new chat; 409 ``too_many_chats`` when the owner has ``max_chats_per_owner``
    (counted by the store in its insert: it holds across processes on PostgreSQL)."""
    services = services_of(request)
    chat = await services.store.create_chat(
        owner=request[OWNER], max_chats=services.config.max_chats_per_owner)
    return web.json_response(chat_summary(chat), status=201)


@ROUTES.patch("/api/chats/{chat_id}")
async def rename_chat(request: web.Request) -> web.Response:
    """Set the chat's title (``{"title": "..."}``), or remove it (``null``: the first
    message names the chat again); a running turn does not refuse it. The chat's
    summary comes back."""
    services, owner = services_of(request), request[OWNER]
    chat_id = request.match_info["chat_id"]
    title = title_field(await read_json(request))
    await services.store.rename_chat(chat_id, title, owner=owner)
    chat = await services.store.load_chat(chat_id, owner=owner)
    first = await services.store.load_messages_lean(chat_id, limit=TITLE_MESSAGES,
                                                    after_seq=0, owner=owner)
    return web.json_response(chat_summary(chat, first.messages, first.total, title))


def _page_token(chat: ChatRecord) -> str:
    raw = json.dumps([chat.updated_at.isoformat(), chat.id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _position(token: str) -> ChatPosition:
    try:
        updated, chat_id = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        at = datetime.fromisoformat(updated)  # in UTC (naive: UTC already, as the stores read it)
        position = ChatPosition(at.replace(tzinfo=at.tzinfo or UTC).astimezone(UTC), str(chat_id))
    except (ValueError, TypeError, binascii.Error, RecursionError,  # nested too deeply
            OverflowError):  # a time whose UTC form lies outside years 1 to 9999
        reject("after", "after is not a page token from this API")
    if first_lone_surrogate(position.id) is not None:  # no store takes such an id
        reject("after", "after is not a page token from this API")
    return position


MAX_SEQ = 2**31 - 1
"""The largest message sequence number the API takes (every store's integers hold it)."""


def whole_number(raw: str) -> bool:
    """ASCII digits only (``str.isdigit`` also takes "²", which ``int`` refuses)."""
    return re.fullmatch(r"[0-9]{1,10}", raw) is not None


def _limit(request: web.Request, default: int) -> int:
    raw = request.query.get("limit")
    if raw is None:
        return default
    if not whole_number(raw) or not 1 <= int(raw) <= MAX_PAGE:
        reject("limit", f"limit must be a whole number from 1 to {MAX_PAGE}")
    return int(raw)


def _search_query(request: web.Request) -> str | None:
    """``q``: the text searched for in titles and first questions (trimmed; None when
    absent or blank, the whole list); 1 to 200 characters, no control characters."""
    raw = request.query.get("q")
    if raw is None or not raw.strip():
        return None
    query = raw.strip()
    if len(query) > MAX_QUERY_CHARS or first_lone_surrogate(query) is not None \
            or any(unicodedata.category(char) == "Cc" for char in query):
        reject("q", f"q must be 1 to {MAX_QUERY_CHARS} characters, none of them control")
    return query


@ROUTES.get("/api/chats")
async def list_chats(request: web.Request) -> web.Response:
    """The caller's chats, most recently updated first, ``limit`` per page."""
    services = services_of(request)
    limit = _limit(request, services.config.page_size)
    after = request.query.get("after")
    owner = request[OWNER]
    position = _position(after) if after else None
    query = _search_query(request)
    chats = await (services.store.list_chats(owner, limit=limit + 1, after=position)
                   if query is None else services.store.search_chats(
                       owner, query, limit=limit + 1, after=position))
    page = chats[:limit]
    titles = await services.store.chat_titles([chat.id for chat in page], owner=owner)
    items = []
    for chat in page:  # each chat's oldest messages (its title) and its count, not all,
        # without their media bytes (``load_messages_lean``): ten chats of a 16 MiB image
        # each made this list take 4.3 s
        first = await services.store.load_messages_lean(
            chat.id, limit=TITLE_MESSAGES, after_seq=0, owner=owner)
        items.append(chat_summary(chat, first.messages, first.total, titles.get(chat.id)))
    following = _page_token(page[-1]) if len(chats) > limit else None
    return web.json_response({"chats": items, "next": following})


METER_TURNS = 20
"""The newest turns read for the context meter, before all of them (``meter_settled``)."""


async def _detail(services: Services, chat_id: str, owner: str,
                  page: MessagePage | None = None) -> dict[str, Any]:
    """The chat view, read a window at a time: its cost does not grow with the chat; its
    messages are read without their media bytes (shown by reference: ``src``)."""
    store, page = services.store, page or MessagePage()
    chat = await store.load_chat(chat_id, owner=owner)
    window = await store.load_messages_lean(chat_id, limit=page.limit,
                                            before_seq=page.before, owner=owner)
    # The window holds the chat's oldest messages when nothing is older, unless it is
    # empty because ``before`` is at or below them (``?before=1``: the title was "New chat").
    oldest = not window.more and (window.messages or page.before is None)
    first = window.messages if oldest else (await store.load_messages_lean(
        chat_id, limit=TITLE_MESSAGES, after_seq=0, owner=owner)).messages
    turns = await store.list_turns(chat_id, limit=METER_TURNS, owner=owner)
    if len(turns) == METER_TURNS and not meter_settled(turns):
        turns = await store.list_turns(chat_id, limit=None, owner=owner)
    titles = await store.chat_titles([chat_id], owner=owner)
    return chat_detail(chat, window, first, turns, services.clock(),
                       registry=services.engine.registry, title=titles.get(chat_id))


def _message_page(request: web.Request) -> MessagePage:
    """``limit`` (1 to 100, default 50) messages before the message ``before``."""
    raw = request.query.get("before")
    if raw is not None and (not whole_number(raw) or not 1 <= int(raw) <= MAX_SEQ):
        reject("before", f"before must be a whole number from 1 to {MAX_SEQ}")
    return MessagePage(limit=_limit(request, MESSAGE_PAGE),
                       before=None if raw is None else int(raw))


@ROUTES.get("/api/chats/{chat_id}")
async def get_chat(request: web.Request) -> web.Response:
    services = services_of(request)
    return web.json_response(await _detail(
        services, request.match_info["chat_id"], request[OWNER], _message_page(request)))


@ROUTES.delete("/api/chats/{chat_id}")
async def delete_chat(request: web.Request) -> web.Response:
    await services_of(request).store.delete_chat(request.match_info["chat_id"],
                                                 owner=request[OWNER])
    return web.Response(status=204)


def seq_param(request: web.Request) -> int:
    raw = request.match_info["seq"]
    if not whole_number(raw) or not 1 <= int(raw) <= MAX_SEQ:
        reject("seq", f"seq must be a whole number from 1 to {MAX_SEQ}")
    return int(raw)


@ROUTES.patch("/api/chats/{chat_id}/messages/{seq}")
async def edit_message(request: web.Request) -> web.Response:
    """Replace a user message's text (its images and files stay); the stored cursor is
    cleared with it. The store refuses the edit while a turn holds the chat (``ChatBusy``,
    a 409), in the write itself: no turn begins between a check and the edit. An
    ``If-Match`` naming another message than the one at ``seq`` is 412 (``_if_match``).

    The write expects the message read (``ExpectedMessage``): one changed by another
    request since is never written over. Under ``If-Match`` that is the 412; without it
    the edit is made again on what is there now (its role checked, its images kept), so
    a race never turns an answer that took the place into the user's text."""
    services, owner = services_of(request), request[OWNER]
    chat_id, seq = request.match_info["chat_id"], seq_param(request)
    text = text_field(await read_json(request), "text", services.config.max_text_chars,
                      required=True)
    wanted = wanted_tags(request)
    for _ in range(EDIT_TRIES):
        found = (await services.store.load_messages(chat_id, limit=1, before_seq=seq + 1,
                                                    owner=owner)).messages
        message = found[0] if found and found[0].seq == seq else None
        check_place(wanted, seq, None if message is None else lean_message(message))
        if message is not None and message.role != Role.USER:
            reject("seq", "only a user message can be edited")
        kept = () if message is None else tuple(  # its images and files stay with it
            p for p in message.parts if isinstance(p, ImagePart | FilePart))
        named = expected(wanted, message)
        try:
            await services.store.edit_message(
                chat_id, seq, (TextPart(text=text), *kept), owner=owner,
                expect=None if message is None else ExpectedMessage.of(message))
        except (MessageChanged, MessageNotFound):
            if named is not None:
                raise await refused_late(services, chat_id, seq, owner) from None
            if message is None:  # none there when read: as before, 404
                raise
            continue  # changed under a request that named no message: read it again
        return web.json_response(await _detail(services, chat_id, owner))
    raise ApiError(409, "message_changed", f"message {seq} kept changing while it was "
                   "edited: reload the chat", field="seq")


EDIT_TRIES = 3
"""Reads and writes of an edit whose message another request changed in between."""


@ROUTES.delete("/api/chats/{chat_id}/messages/{seq}")
async def delete_messages(request: web.Request) -> web.Response:
    """Delete the message and every later one; the stored cursor is cleared with them.
    An ``If-Match`` naming another message than the one at ``seq`` is 412 (``_if_match``),
    checked again in the delete's own write (another request's write between the check
    and the delete is the same 412, nothing deleted)."""
    services, owner = services_of(request), request[OWNER]
    chat_id, seq = request.match_info["chat_id"], seq_param(request)
    wanted = wanted_tags(request)
    named = None
    if wanted is not None:
        current = await message_at(services, chat_id, seq, owner)
        check_place(wanted, seq, current)
        named = expected(wanted, current)
    try:
        deleted = await services.store.delete_messages_from(chat_id, seq, owner=owner,
                                                            expect=named)
    except (MessageChanged, MessageNotFound):
        if wanted is None:
            raise
        raise await refused_late(services, chat_id, seq, owner) from None
    return web.json_response({"deleted": deleted, **await _detail(services, chat_id, owner)})


HEALTH_SECONDS = 2.0
"""How long ``/healthz`` waits for the store: a silent database is a 503 within it, not
after the store's own bounds (35 s measured: every probe then held a pooled connection
that long, and an orchestrator's probe gave up long before)."""


@ROUTES.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    """200 when the store answers a query within ``HEALTH_SECONDS``, else 503."""
    try:
        async with asyncio.timeout(HEALTH_SECONDS):
            await services_of(request).store.list_chats("", limit=1)
    except Exception:  # TimeoutError among them
        return web.json_response({"status": "unavailable"}, status=503)
    return web.json_response({"status": "ok"})


@ROUTES.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    body = services_of(request).metrics.render()
    return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4"})
