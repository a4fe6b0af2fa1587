"""The ids ``POST /api/ui-messages`` names stored messages by (idem9; see docs/server.md).

``GET /api/ui-messages/{chat}`` hands out each message's stored id for a question (its
turn's ``<turn id>:user``) and its turn id for an answer: neither is ever given to another
message, so an id a stale tab holds names that message or nothing. (Questions were named
``CHAT:SEQ``, a seq that "delete from here" hands to the next question: a stale tab's
edit or regenerate replaced a question it never saw. Such an id now names nothing.) A
question ``useChat`` sent itself keeps the id the client gave it: the store recorded it as
the turn's client key (``TurnInput.client_key``), which names that question, or the one an
edit of it put in its place, for as long as the chat holds it. An id that names nothing the
chat holds is ``404 message_not_found``, never the message at the same place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aiohttp import web

from turnstate.core import FilePart, ImagePart, MediaRef
from turnstate.core._conversation import Message, Role
from turnstate.engine._turn_input import client_key_problem
from turnstate.server._http import OWNER, ApiError, reject
from turnstate.server._routes import services_of
from turnstate.storage import LeanMessage
from turnstate.storage._records import answer_turn_id, message_ids


def sent_key(messages: Any) -> str | None:
    """The client key of a submit: the id of the last user message sent, when it can be
    one (``client_key_problem``; else the turn has none)."""
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            key = message.get("id")
            return key if isinstance(key, str) and client_key_problem(key) is None else None
    return None


async def named_message(request: web.Request, chat_id: str, message_id: Any,
                        messages: Sequence[LeanMessage]) -> LeanMessage:
    """The stored message an AI SDK ``messageId`` names (see the module docstring): its
    stored id, an answer's turn id, or a question's client key; else ``404
    message_not_found`` naming ``messageId``."""
    if not isinstance(message_id, str):
        reject("messageId", "messageId must be a message id string")
    by_id = {m.id: m for m in messages}
    found = by_id.get(message_id) or by_id.get(message_ids(message_id)[1])  # an answer's
    if found is None and client_key_problem(message_id) is None:
        store = services_of(request).store
        keyed = getattr(store, "keyed_turn", None)
        turn_id = None if keyed is None else await keyed(chat_id, message_id)
        question = None if turn_id is None else message_ids(turn_id)[0]
        found = None if question is None else by_id.get(question)
        if question is not None and found is None:
            # The key names a question ``messages`` does not hold: a turn that took it
            # began after they were read (another copy of this edit, at once), so they
            # are read again, as they stand now (a 404 before: edits10's race).
            fresh = await store.list_messages_lean(chat_id, owner=request[OWNER])
            found = next((m for m in fresh if m.id == question), None)
    if found is None:
        raise ApiError(404, "message_not_found", f"no message {message_id!r} in this chat",
                       field="messageId")
    return found


def is_question(message: LeanMessage) -> bool:
    return message.role == Role.USER


async def regenerated_by(request: web.Request, chat_id: str, message_id: Any,
                         messages: Sequence[LeanMessage],
                         copy: dict[str, Any] | None) -> str | None:
    """The turn that now answers the question whose answer (or question) ``message_id``
    named, when a ``regenerate({messageId})`` already replaced it: the request is a copy
    of that regenerate's (a network retry, or a tab that never saw the new answer), which
    that turn answers, never the model again (places11). None unless ``message_id`` names
    a turn of this chat whose messages are gone, whose question's place holds the question
    of another turn, asked in the same words as ``copy`` (the request's last user message;
    None: it sent none) and followed by nothing but that turn's answer."""
    if not isinstance(message_id, str) or client_key_problem(message_id) is not None:
        return None
    user_suffix = message_ids("")[0]
    turn_id = answer_turn_id(message_id) or message_id.removesuffix(user_suffix)
    if any(m.id in (message_id, *message_ids(turn_id)) for m in messages):
        return None  # named and held: an ordinary regenerate
    try:
        record = await services_of(request).store.load_turn(turn_id)
    except LookupError:
        return None
    if record.chat_id != chat_id:
        return None
    place = next((m for m in messages if m.seq == record.user_seq), None)
    if place is None or not is_question(place) or not place.id.endswith(user_suffix):
        return None
    holder = place.id.removesuffix(user_suffix)
    after = {m.id for m in messages if m.seq > place.seq}
    if not after <= {message_ids(holder)[1]}:
        return None
    return None if copy is not None and copy_differs(copy, place) else holder


def copy_differs(copy: dict[str, Any], held: LeanMessage | Message) -> bool:
    """Whether a client's copy of a question (a UI message) is not the stored one: its
    text parts joined, and its number of files (images and PDFs)."""
    parts = [p for p in copy.get("parts", ()) if isinstance(p, dict)]
    text = "".join(str(p.get("text")) for p in parts if p.get("type") == "text")
    files = sum(p.get("type") == "file" for p in parts)
    return text != held.text() or files != sum(
        isinstance(p, ImagePart | FilePart | MediaRef) for p in held.parts)
