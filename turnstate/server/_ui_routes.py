"""The Vercel AI SDK's chat transport against turnstate (see docs/server.md).

``POST /api/ui-messages`` takes what ``DefaultChatTransport`` sends (``id``: the chat,
``messages``, ``trigger``, ``messageId``, plus the transport's ``body``: ``provider``,
``model`` and the other turn fields) and answers one turn as a UI message stream.
``GET /api/ui-messages/{chat_id}`` is the chat's history as ``UIMessage`` objects (a
``useChat``'s initial messages); ``GET /api/ui-messages/{chat_id}/stream`` is the
transport's resume URL: 204 (nothing to resume) until turns are resumable.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from turnstate.core._conversation import Message, Role, TransitionPart
from turnstate.core._events import TurnAborted, TurnCompleted, TurnEvent
from turnstate.server._http import OWNER, reject
from turnstate.server._owner_scope import TURN_OWNER
from turnstate.server._routes import read_json, services_of
from turnstate.server._turns import turn_input
from turnstate.server._ui_stream import HEADERS, UiStream, sse, ui_message
from turnstate.storage import TurnRecord

ROUTES = web.RouteTableDef()


def _last_user_text(messages: Any) -> str:
    """The text of the last user message the client sent."""
    if not isinstance(messages, list):
        reject("messages", "messages must be a list of UI messages")
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            parts = message.get("parts")
            if isinstance(parts, list):
                return "".join(str(p.get("text", "")) for p in parts
                               if isinstance(p, dict) and p.get("type") == "text")
    reject("messages", "messages hold no user message")


async def _question(request: web.Request, body: dict[str, Any], chat_id: str) -> str:
    """The text to answer: the last user message sent, or for ``regenerate-message``
    the last stored question, deleted with what follows it (it is asked again)."""
    if body.get("trigger") != "regenerate-message":
        return _last_user_text(body.get("messages"))
    store, owner = services_of(request).store, request[OWNER]
    asked = [m for m in await store.list_messages(chat_id, owner=owner) if m.role == Role.USER]
    if not asked:
        reject("trigger", "there is no question to regenerate")
    await store.delete_messages_from(chat_id, asked[-1].seq, owner=owner)
    return asked[-1].text()


@ROUTES.post("/api/ui-messages")
async def post_ui_message(request: web.Request) -> web.StreamResponse:
    services, body = services_of(request), await read_json(request)
    chat_id = body.get("id")
    if not isinstance(chat_id, str) or not chat_id:
        reject("id", "id must be the chat's id (create one with POST /api/chats)")
    await services.store.load_chat(chat_id, owner=request[OWNER])  # 404 before anything
    fields: dict[str, Any] = {k: body[k] for k in ("provider", "model", "system_prompt",
                                                   "tools", "compaction") if k in body}
    turn = turn_input({**fields, "text": await _question(request, body, chat_id)}, services,
                      request[OWNER])
    TURN_OWNER.set(turn.owner)
    events = aiter(services.engine.run_turn(chat_id, turn))
    try:
        first = await anext(events)  # ChatNotFound / ChatBusy surface here, as JSON
    except BaseException:
        await events.aclose()  # type: ignore[attr-defined]
        raise
    assert turn.turn_id is not None
    return await _stream(request, turn.turn_id, first, events)


async def _stream(request: web.Request, turn_id: str, first: TurnEvent,
                  events: Any) -> web.StreamResponse:
    services = services_of(request)
    task = asyncio.current_task()
    assert task is not None
    services.turn_tasks.add(task)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache", **HEADERS})
    ui = UiStream(turn_id)
    try:
        await response.prepare(request)
        await response.write(b"".join(sse(c) for c in [*ui.start(), *ui.chunks(first)]))
        async for event in events:
            chunks = ui.chunks(event)
            if isinstance(event, TurnCompleted | TurnAborted):
                await response.write_eof(b"".join(sse(c) for c in chunks) + sse("[DONE]"))
                return response
            if chunks:
                await response.write(b"".join(sse(c) for c in chunks))
        await response.write_eof(sse("[DONE]"))
        return response
    finally:
        await events.aclose()  # ends an unfinished turn (the client went away)
        services.turn_tasks.discard(task)


def _turn_data(record: TurnRecord, message: Message) -> dict[str, Any]:
    degradation = next((p.reason for p in message.parts if isinstance(p, TransitionPart)),
                       None)
    return {"turnId": record.id, "strategy": record.strategy,
            "path": [record.path[0].source, *(s.dest for s in record.path)]
            if record.path else [], "outcome": record.status.value, "reason": record.reason,
            "degradation": degradation}


@ROUTES.get("/api/ui-messages/{chat_id}")
async def get_ui_messages(request: web.Request) -> web.Response:
    """The chat's messages as ``UIMessage`` objects (every one; for a long chat, page
    ``GET /api/chats/{id}`` instead)."""
    store, owner = services_of(request).store, request[OWNER]
    chat_id = request.match_info["chat_id"]
    messages = await store.list_messages(chat_id, owner=owner)
    turns = {t.assistant_message_id: t for t in await store.list_turns(
        chat_id, limit=None, owner=owner) if t.assistant_message_id is not None}
    out = []
    for message in messages:
        record = turns.get(message.id)
        out.append(ui_message(message, _turn_data(record, message) if record else None))
    return web.json_response(out)


@ROUTES.get("/api/ui-messages/{chat_id}/stream")
async def resume_ui_stream(request: web.Request) -> web.Response:
    """The transport's reconnect: 204, nothing to resume (turns end with their stream)."""
    await services_of(request).store.load_chat(request.match_info["chat_id"],
                                               owner=request[OWNER])
    return web.Response(status=204)
