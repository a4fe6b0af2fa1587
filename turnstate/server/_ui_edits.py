"""An AI SDK edit on ``POST /api/ui-messages`` (see docs/server.md).

``useChat``'s ``sendMessage({text, files, messageId})`` replaces the user message
``messageId`` names, drops every later one, and posts ``trigger: "submit-message"`` with
that ``messageId``. The turn replaces the stored question (``replace_from``: its begin
deletes it and what follows in the write that takes the chat) named by its id: the one
``GET /api/ui-messages`` hands out, or for a message the client sent itself the id it
gave it (``_ui_ids``); an id that names no question the chat holds is ``404``.

A question loaded from the history carries its images and PDFs as this server's media
route (``/api/chats/{id}/messages/{seq}/parts/{index}``), which the edit sends back: such
a URL (a path, or an http(s) URL of the host the request came to) is read from the
store, never fetched, and only as the caller's own part of this chat; anything else it
names is refused (400 naming the part), as is a URL of another shape that is no https.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from aiohttp import web

from turnstate.core._conversation import Message
from turnstate.core._errors import ChatNotFound, MessageNotFound
from turnstate.server._content import api_part
from turnstate.server._http import OWNER, ApiError, reject
from turnstate.server._routes import services_of
from turnstate.server._ui_ids import copy_differs, is_question, named_message
from turnstate.storage import LeanMessage
from turnstate.storage._lean import base64_size

_ROUTE = re.compile(r"/api/chats/([^/?#]+)/messages/([0-9]{1,19})/parts/([0-9]{1,3})")
_SCHEMES = ("http", "https")


def own_part(url: str, host: str) -> tuple[str, int, int] | None:
    """The chat id, seq and part index a URL of this server's media route names (a path,
    or an http(s) URL whose host is ``host``, the request's); None for any other URL."""
    split = urlsplit(url)
    if split.scheme or split.netloc:
        if split.scheme.lower() not in _SCHEMES or split.netloc.lower() != host.lower():
            return None
    elif not url.startswith("/"):
        return None
    match = _ROUTE.fullmatch(split.path)
    if match is None or split.query or split.fragment:
        return None
    return unquote(match.group(1)), int(match.group(2)), int(match.group(3))


async def own_media(request: web.Request, chat_id: str, content: list[dict[str, Any]] | None,
                    paths: Sequence[str]) -> list[dict[str, Any]] | None:
    """``content`` with each part that names this server's media route read from the
    store (its bytes inline, as the question was first sent). The inline bytes are
    counted as the parts are read: the part that takes them past the engine's
    ``max_inline_bytes`` is ``413 content_too_large`` and those after it are never read
    (each read holds the part's bytes and their base64)."""
    if not content:
        return content
    bound = services_of(request).engine.limits.max_inline_bytes
    out, total = [], 0
    for sent, where in zip(content, paths, strict=True):
        url = sent.get("url")
        named = own_part(url, request.host) if isinstance(url, str) else None
        part = sent if named is None else await _stored(request, chat_id, named, sent,
                                                        f"{where}.url")
        data = part.get("data")
        total += base64_size(data) if isinstance(data, str) else 0
        if total > bound:  # the parts after it are not read (a part named 200 times)
            raise ApiError(413, "content_too_large", f"the parts carry more than {bound:,} "
                           "inline bytes, the most a turn takes", field=f"{where}.url")
        out.append(part)
    return out


async def _stored(request: web.Request, chat_id: str, named: tuple[str, int, int],
                  sent: dict[str, Any], field: str) -> dict[str, Any]:
    named_chat, seq, index = named
    if named_chat != chat_id:
        reject(field, "the URL names an image or file of another chat: send its bytes")
    try:
        part = await services_of(request).store.load_media_part(
            chat_id, seq, index, owner=request[OWNER])
    except (ChatNotFound, MessageNotFound):
        part = None
    if part is None or part.data is None:
        reject(field, f"the URL names no image or file this chat holds (message {seq}, "
                      f"part {index})")
    stored = api_part(part)
    if isinstance(sent.get("filename"), str):
        stored["filename"] = sent["filename"]
    return stored


async def edited_seq(request: web.Request, chat_id: str, message_id: Any,
                     before: Sequence[Any] = ()) -> int:
    """The seq of the stored question an edit's ``messageId`` names (``_ui_ids``); ``404
    message_not_found`` when it names no question the chat holds. ``before``: the messages
    the client sent before the edited one (its own copy of the chat up to it), whose
    questions must be the stored ones (``stale_copy``)."""
    messages = await services_of(request).store.list_messages_lean(
        chat_id, owner=request[OWNER])
    found = await named_message(request, chat_id, message_id, messages)
    if not is_question(found):
        raise ApiError(404, "message_not_found", f"no question {message_id!r} in this chat",
                       field="messageId")
    stale = stale_copy(before, [m for m in messages if m.seq < found.seq and is_question(m)])
    if stale is not None:
        raise ApiError(409, "message_changed", "a question before the edited one was changed "
                       "since this client read the chat (another tab edited it): reload the "
                       "chat", field=f"messages[{stale}]")
    return found.seq


def stale_copy(sent: Sequence[Any], stored: Sequence[LeanMessage | Message]) -> int | None:
    """Where the questions a client sent (UI messages) are not the newest of ``stored``
    (the chat's questions at the same place, oldest first), matched from the newest back,
    each by its text and number of files (as ``_replay`` compares): the index in ``sent``
    of the first that differs (or of the oldest, when the client sent more than the chat
    holds), None when they agree. A client that sent none, or only the newest few, is
    checked for what it sent (places11)."""
    asked = [(at, m) for at, m in enumerate(sent) if isinstance(m, dict)
             and m.get("role") == "user" and isinstance(m.get("parts"), list)]
    if len(asked) > len(stored):
        return asked[0][0]
    for (at, copy), held in zip(reversed(asked), reversed(stored), strict=False):
        if copy_differs(copy, held):
            return at
    return None
