"""The Vercel AI SDK's chat transport against turnstate (see docs/server.md).

``POST /api/ui-messages`` takes what ``DefaultChatTransport`` sends (``id``: the chat,
``messages``, ``trigger``, ``messageId``, plus the transport's ``body``: ``provider``,
``model`` and the other turn fields) and answers one turn as a UI message stream.
``GET /api/ui-messages/{chat_id}`` is the chat's history as ``UIMessage`` objects (a
``useChat``'s initial messages); ``GET /api/ui-messages/{chat_id}/stream`` is the
transport's resume URL: the chat's running turn replayed from its first event, or 204.
Turns run detached, as ``POST /api/chats/{id}/turns`` starts them: a client that leaves
only ends its stream (unless ``--cancel-on-disconnect``). A submit's (or an edit's) sent
user message id is its turn's client key: a retry of it runs nothing and streams the turn
it names (``_replay``; an edit's retry too: ``_edit_retry``).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

import attrs
from aiohttp import web

from turnstate.core import FilePart, ImagePart
from turnstate.core._conversation import Message, Role, TransitionPart
from turnstate.core._errors import (
    InvalidInput,
    MessageChanged,
    MessageNotFound,
    TurnKeyRecorded,
)
from turnstate.server._content import (
    MAX_PARTS,
    api_part,
    body_field,
    text_first,
    ui_file_part,
)
from turnstate.server._edit_retry import start_edit
from turnstate.server._http import OWNER, ApiError, reject
from turnstate.server._owner_limits import LargeSlot
from turnstate.server._owner_scope import TURN_OWNER
from turnstate.server._replay import REPLAYED_HEADER, replayed
from turnstate.server._resume import turn_stream
from turnstate.server._routes import chat_id_field, read_json, services_of
from turnstate.server._services import Services
from turnstate.server._sse import TurnStream, slices
from turnstate.server._turns import large_body, turn_input
from turnstate.server._ui_edits import edited_seq, own_media, stale_copy
from turnstate.server._ui_ids import copy_differs, named_message, regenerated_by, sent_key
from turnstate.server._ui_stream import HEADERS, UiStream, sse, ui_message
from turnstate.storage import CutExpected, ExpectedMessage, LeanMessage, TurnRecord
from turnstate.storage._records import message_ids
from turnstate.storage._turn_log import LoggedEvent

ROUTES = web.RouteTableDef()


Asked = tuple[dict[str, Any], tuple[str, ...]]
"""What to ask (``text``, ``content``...) and where each ``content`` part came from in the
request (``messages[2].parts[1]``; none for a stored question)."""


def _last_user_message(messages: Any) -> tuple[Asked, int]:
    """The last user message the client sent, as this API's ``text`` and ``content``
    (its ``file`` parts: images and PDFs, inline as ``data:`` URLs, by https URL, or by
    this server's media route: ``_ui_edits``), and its index in ``messages``."""
    if not isinstance(messages, list):
        reject("messages", "messages must be a list of UI messages")
    for index in reversed(range(len(messages))):
        message = messages[index]
        if isinstance(message, dict) and message.get("role") == "user" \
                and isinstance(message.get("parts"), list):
            return _asked(message["parts"], f"messages[{index}].parts"), index
    reject("messages", "messages hold no user message")


def _asked(parts: list[Any], where: str) -> Asked:
    """A user message's text parts joined (each must hold a string: a ``null`` was asked
    as "None") and its file parts as content parts; other parts are not asked."""
    texts: list[str] = []
    files: list[dict[str, Any]] = []
    paths: list[str] = []
    for at, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            if not isinstance(part.get("text"), str):
                reject(f"{where}[{at}].text", "a text part's text must be a string")
            texts.append(part["text"])
        elif kind == "file":
            if len(files) == MAX_PARTS:  # before any is read (``own_media``)
                reject(where, f"a message may carry at most {MAX_PARTS} files")
            files.append(ui_file_part(part, f"{where}[{at}]"))
            paths.append(f"{where}[{at}]")
    return {"text": "".join(texts), "content": files or None}, tuple(paths)


_CONTENT_FIELD = re.compile(r"content\[(\d+)\](.*)")
_UI_NAMES = {".data": ".url"}  # a file part's bytes come in its data URL


def _where_sent(field: str, paths: tuple[str, ...]) -> str:
    """A refusal's ``content[i]...`` field named where the client sent the part."""
    match = _CONTENT_FIELD.fullmatch(field)
    if match is None or int(match.group(1)) >= len(paths):
        return field
    return paths[int(match.group(1))] + _UI_NAMES.get(match.group(2), match.group(2))


async def _question(request: web.Request, body: dict[str, Any], chat_id: str) -> Asked:
    """What to answer (``text`` and ``content``): the last user message sent (for an
    edit, ``messageId`` set, replacing the stored question it names: ``_ui_edits``), or for
    ``regenerate-message`` a stored question asked again with its images and files in its
    own place (``replace_from``, its seq: the turn's begin deletes it with what follows it
    in the write that takes the chat, so a refused turn deletes nothing and no other turn
    can come between): the one ``messageId`` names (``regenerate({messageId})``: an answer
    by its turn id, a question by its id: ``_ui_ids``), else the last one."""
    if body.get("trigger") != "regenerate-message":
        (sent, paths), index = _last_user_message(body.get("messages"))
        sent["content"] = await own_media(request, chat_id, sent["content"], paths)
        if body.get("messageId") is not None:  # an edit: it replaces the question named,
            # and the client's copy of the questions before it must be the stored ones
            sent["replace_from"] = await edited_seq(request, chat_id, body["messageId"],
                                                    body["messages"][:index])
        return sent, paths
    store, owner = services_of(request).store, request[OWNER]
    messages = await store.list_messages_lean(chat_id, owner=owner)  # without the bytes
    retried = await regenerated_by(request, chat_id, body.get("messageId"), messages,
                                   _sent_question(body))
    if retried is not None:  # the turn that regenerated it already: answered by it
        return {_RETRIED: retried}, ()
    upto = await _named_seq(request, chat_id, body.get("messageId"), messages)
    asked = [m for m in messages if m.role == Role.USER and (upto is None or m.seq <= upto)]
    if not asked:
        reject("trigger", "there is no question to regenerate")
    seq = asked[-1].seq
    found = (await store.load_messages(chat_id, limit=1, before_seq=seq + 1,
                                       owner=owner)).messages
    if not found or found[0].id != asked[-1].id:  # deleted meanwhile
        raise MessageNotFound(chat_id, seq)
    question = found[0]
    _same_copy(body, question)
    _same_before(body, asked[:-1])
    media = [api_part(p) for p in question.parts if isinstance(p, ImagePart | FilePart)]
    return {"text": question.text(), "content": media or None, "replace_from": seq,
            _KEPT: await _kept_key(request, chat_id, question.id),
            _READ: ExpectedMessage.of(question)}, ()


_RETRIED = "regenerated by"
"""A regenerate's ``_question`` when the answer it names was regenerated already: the
turn that did (``regenerated_by``), whose events answer it (places11)."""
_KEPT = "client key kept"
"""A regenerate's ``_question``: the client key its question was asked with, which the
turn that asks it again takes over, so a retry of that question's first request is still
answered (its cut freed the key, and the retry asked it once more: edits10)."""
_READ = "question read"
"""A regenerate's ``_question``: the stored question it compared the tab's copy with,
which its begin expects at the cut (``CutExpected``): another tab's edit between the two
is the same ``409 message_changed``, nothing asked or cut (places12)."""
_USER_SUFFIX = message_ids("")[0]


async def _kept_key(request: web.Request, chat_id: str, question_id: str) -> str | None:
    read = getattr(services_of(request).store, "turn_key", None)
    if read is None or not question_id.endswith(_USER_SUFFIX):
        return None
    key: str | None = await read(chat_id, question_id.removesuffix(_USER_SUFFIX))
    return key


def _sent_question(body: dict[str, Any]) -> dict[str, Any] | None:
    """The last user message a request sent (None: none)."""
    sent = body.get("messages")
    users = [m for m in sent if isinstance(m, dict) and m.get("role") == "user"
             and isinstance(m.get("parts"), list)] if isinstance(sent, list) else []
    return users[-1] if users else None


def _same_copy(body: dict[str, Any], question: Message) -> None:
    """A regenerate's own copy of the question it asks again (the last user message it
    sent: ``regenerate()`` sends the messages up to it) must be the stored one (text, and
    number of images and files): a tab that holds a question another tab edited since
    (the SDK keeps the message's id across edits, so the id names the edited one) is
    ``409 message_changed``, never an answer to a question it never saw (edits10). A
    request that sent no user message asks the stored one."""
    copy = _sent_question(body)
    if copy is not None and copy_differs(copy, question):
        raise ApiError(409, "message_changed", "the question to regenerate was changed "
                       "since this client read it (another tab edited it): reload the chat",
                       field="messageId" if body.get("messageId") is not None
                       else "messages")


def _same_before(body: dict[str, Any], stored: Sequence[LeanMessage]) -> None:
    """The questions a regenerate sent before the one it asks again must be the stored
    ones (``stale_copy``): else ``409 message_changed`` naming the first that differs
    (another client edited it in place since: places11)."""
    sent = body.get("messages")
    if not isinstance(sent, list):
        return
    last = max((at for at, m in enumerate(sent) if isinstance(m, dict)
                and m.get("role") == "user" and isinstance(m.get("parts"), list)),
               default=0)
    stale = stale_copy(sent[:last], stored)
    if stale is not None:
        raise ApiError(409, "message_changed", "a question before the one to regenerate was "
                       "changed since this client read the chat (another tab edited it): "
                       "reload the chat", field=f"messages[{stale}]")


async def _named_seq(request: web.Request, chat_id: str, message_id: Any,
                     messages: Sequence[LeanMessage]) -> int | None:
    """The seq of the stored message a regenerate's ``messageId`` names (None: none named;
    ``_ui_ids``); an id the chat does not hold is ``404 message_not_found``, never
    another question."""
    if message_id is None:
        return None
    return (await named_message(request, chat_id, message_id, messages)).seq


@ROUTES.post("/api/ui-messages")
async def post_ui_message(request: web.Request) -> web.StreamResponse:
    services, owner = services_of(request), request[OWNER]
    with services.limits.stream(owner), \
            services.limits.large_body(owner, large_body(request, services)) as slot:
        return await _post_ui_message(request, services, slot)  # 429s before the read


async def _post_ui_message(request: web.Request, services: Services,
                           slot: LargeSlot | None) -> web.StreamResponse:
    body = await read_json(request, limit=services.config.max_content_bytes)
    chat_id = chat_id_field(body, "id")
    await services.store.load_chat(chat_id, owner=request[OWNER])  # 404 before anything
    fields: dict[str, Any] = {k: body[k] for k in ("provider", "model", "system_prompt",
                                                   "tools", "compaction", "settings") if k in body}
    key = None if body.get("trigger") == "regenerate-message" else sent_key(
        body.get("messages"))  # a submit's, an edit's: the sent message's id (_replay)
    question, paths = await _question(request, body, chat_id)
    if _RETRIED in question:
        del body  # its messages' data URLs: not held while the stream is sent
        return await _regenerated(request, services, chat_id, question[_RETRIED])
    again = _KEPT in question  # a regenerate: its question's key, never a retry's check
    key = question.pop(_KEPT, key)
    read = question.pop(_READ, None)
    asked = {**fields, **question}
    del body, question  # its messages' data URLs: not held while the turn runs
    shift = text_first(asked)
    # A detached turn, as POST /api/chats/{id}/turns starts: ChatBusy (and for a
    # regenerate, MessageNotFound: the question went meanwhile) surface here; a refused
    # part is named where the client sent it.
    try:
        turn = turn_input(asked, services, request[OWNER], key)
        if read is not None:  # compared again in the begin's write
            turn = attrs.evolve(turn, expect=CutExpected(message=read))
        del asked  # its files' base64 text too, once decoded (memory7)
        TURN_OWNER.set(turn.owner)  # copied into the turn's task: scopes emulator faults
        live = await (services.start_turn(chat_id, turn, slot) if again
                      else start_edit(services, chat_id, turn, slot, field=None))
    except TurnKeyRecorded as found:  # a retry: the turn its key names, from its start
        following = await replayed(request, services, chat_id, found, turn, field="messages")
        del turn
        return await _stream(request, found.turn_id, following.batches,
                             headers={REPLAYED_HEADER: "true"})
    except ApiError as exc:
        raise ApiError(exc.status, exc.error, exc.message, extra=exc.extra,
                       headers=exc.headers,
                       field=exc.field and _where_sent(exc.field, paths)) from None
    except InvalidInput as exc:
        named = body_field(exc, shift)
        raise InvalidInput(_where_sent(named.field, paths), named.problem) from None
    except MessageChanged:  # the question regenerated was edited after it was compared
        raise ApiError(409, "message_changed", "the question to regenerate was changed "
                       "meanwhile (another tab edited it): nothing was asked; reload the "
                       "chat", field="messages") from None
    del turn  # its media are the engine's now, let go once sent (embed7)
    return await _stream(request, live.turn_id, live.follow_batches(0),
                         cancel_on_leave=services.config.cancel_on_disconnect)


async def _regenerated(request: web.Request, services: Services, chat_id: str,
                      turn_id: str) -> web.StreamResponse:
    """A copy of a regenerate that ran already, answered with the turn that ran it from its
    first event (``Idempotent-Replayed: true``), the model not asked again (places11)."""
    try:
        following = await services.engine.follow(chat_id, turn_id, owner=request[OWNER])
    except LookupError:  # its stored end is gone too: nothing to answer with
        raise ApiError(404, "message_not_found", "the answer to regenerate was regenerated "
                       "already, and that turn cannot be read", field="messageId") from None
    return await _stream(request, turn_id, following.batches,
                         headers={REPLAYED_HEADER: "true"})


@ROUTES.get("/api/ui-messages/{chat_id}/stream", allow_head=False)  # a stream
async def resume_ui_stream(request: web.Request) -> web.StreamResponse:
    """The transport's reconnect: the chat's running turn from its first event (the SDK
    replays it into a fresh message), or 204 when no turn runs."""
    services, owner = services_of(request), request[OWNER]
    chat_id = request.match_info["chat_id"]
    chat = await services.store.load_chat(chat_id, owner=owner)
    if chat.active_turn_id is None:
        return web.Response(status=204)
    with services.limits.stream(owner):
        try:
            following = await services.engine.follow(chat_id, chat.active_turn_id,
                                                     owner=owner)
        except LookupError:  # it ended meanwhile, or runs nowhere we can follow
            return web.Response(status=204)
        return await _stream(request, chat.active_turn_id, following.batches)


async def _stream(request: web.Request, turn_id: str,
                  batches: AsyncIterator[tuple[LoggedEvent, ...]],
                  *, cancel_on_leave: bool = False,
                  headers: dict[str, str] | None = None) -> web.StreamResponse:
    """The turn's events as the UI message stream, on a turn's stream (its ``: ping``
    while idle is a comment the SDK's parser skips); ``headers``: more to send."""
    sent = HEADERS if headers is None else {**HEADERS, **headers}
    async with turn_stream(request, services_of(request), sent, turn_id=turn_id,
                           cancel_on_leave=cancel_on_leave) as response:
        await _send_ui(response, UiStream(turn_id), batches)
    return response


async def _send_ui(response: TurnStream, ui: UiStream,
                   batches: AsyncIterator[tuple[LoggedEvent, ...]]) -> None:
    """The events' chunks, a write per slice of a batch (``_sse.slices``), as a turn's
    own stream writes them: a replay or reconnect of a long turn (its log at once) wrote
    each of its events apart, a system call each."""
    await response.send(b"".join(sse(c) for c in ui.start()))
    async for batch in batches:
        for piece in slices(batch):
            frames = b"".join([sse(chunk) for entry in piece
                               for chunk in ui.chunks(entry.type, json.loads(entry.data))])
            if piece[-1].final:  # the last event of its batch
                await response.finish(frames + sse("[DONE]"))
                return
            if frames:
                await response.send(frames)
    await response.finish(sse("[DONE]"))


def _turn_data(record: TurnRecord, message: LeanMessage) -> dict[str, Any]:
    degradation = next((p.reason for p in message.parts if isinstance(p, TransitionPart)),
                       None)
    return {"turnId": record.id, "strategy": record.strategy,
            "path": [record.path[0].source, *(s.dest for s in record.path)]
            if record.path else [], "outcome": record.status.value, "reason": record.reason,
            "degradation": degradation}


@ROUTES.get("/api/ui-messages/{chat_id}")
async def get_ui_messages(request: web.Request) -> web.Response:
    """The chat's messages as ``UIMessage`` objects (every one; for a long chat, page
    ``GET /api/chats/{id}`` instead), read without their media bytes: an image or PDF is
    the URL of the route that serves it."""
    store, owner = services_of(request).store, request[OWNER]
    chat_id = request.match_info["chat_id"]
    messages = await store.list_messages_lean(chat_id, owner=owner)
    turns = {t.assistant_message_id: t for t in await store.list_turns(
        chat_id, limit=None, owner=owner) if t.assistant_message_id is not None}
    out = []
    for message in messages:
        record = turns.get(message.id)
        out.append(ui_message(message, _turn_data(record, message) if record else None))
    return web.json_response(out)
