"""``POST /api/chats/{id}/turns``: one turn, streamed as server-sent events.

The request is checked in full before the engine is asked for anything. The turn is
started detached (``TurnEngine.start_turn``) and its first event awaited before the
response starts, so a missing chat (404) or a busy one (409 ``chat_busy``) is a plain
JSON answer given before any provider call. Then every event goes out as one SSE event
with its id, named by its ``type``, with the event as JSON data (``_resume.stream``); a
comment line keeps an idle stream alive. If the client goes away, the turn runs on to
its end and commits (``serve --cancel-on-disconnect`` cancels it instead); the client
resumes with ``GET .../turns/{turn_id}/events`` (the id is the ``X-Turn-Id`` header).
A request with an ``Idempotency-Key`` its chat's turn already holds runs nothing: it is
answered with that turn (``_replay``), as is the retry of an edit (``replace_from``) whose
cut freed its key (``_edit_retry``). A turn with ``replace_from`` (the page's Regenerate,
Retry and "Save & regenerate") may name the question it replaces by ``If-Match``
(``_if_match.cut_check``): 412 when the place holds another message.
When the server stops, every running turn ends ``aborted`` with ``cancelled`` and its
open streams get that final event before the connections close.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from turnstate.core import TextPart
from turnstate.core._context import ContextSettings, OverflowPolicy
from turnstate.core._errors import (
    InvalidInput,
    MessageChanged,
    MessageNotFound,
    TurnKeyRecorded,
)
from turnstate.core._generation import NO_SETTINGS, GenerationSettings
from turnstate.engine import TurnInput
from turnstate.engine._follow import Following
from turnstate.engine._turn_input import new_turn_id
from turnstate.server._content import body_field, content_parts, text_first
from turnstate.server._edit_retry import start_edit
from turnstate.server._http import OWNER, reject
from turnstate.server._if_match import cut_check, refused_late
from turnstate.server._owner_limits import LargeSlot
from turnstate.server._owner_scope import TURN_OWNER
from turnstate.server._replay import KEY_HEADER, REPLAYED_HEADER, header_key, replayed
from turnstate.server._resume import stream
from turnstate.server._routes import read_json, services_of, text_field
from turnstate.server._services import Services

ROUTES = web.RouteTableDef()


def turn_input(body: dict[str, Any], services: Services, owner: str,
               client_key: str | None = None) -> TurnInput:
    """The body as a ``TurnInput`` (with the request's ``client_key``: ``_replay``), or a
    400/413 naming the first field at fault."""
    limit = services.config.max_text_chars
    provider = body.get("provider")
    if not isinstance(provider, str) or provider not in services.providers():
        reject("provider", f"provider must be one of {services.providers()}")
    model = body.get("model")
    if not isinstance(model, str) or (provider, model) not in services.engine.registry.models:
        reject("model", f"unknown model for provider {provider!r}")
    prompt = text_field(body, "system_prompt", limit, required=False)
    text = text_field(body, "text", limit, required=body.get("content") is None)
    content = content_parts(body.get("content"), max_text_chars=limit,
                            max_inline_bytes=services.engine.limits.max_inline_bytes)
    names = body.get("tools", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) \
            or len(set(names)) != len(names):
        reject("tools", "tools must be a list of distinct tool names")
    unknown = [n for n in names if n not in services.tools]
    if unknown:
        reject("tools", f"unknown tools {unknown}; known: {sorted(services.tools)}")
    compaction = body.get("compaction", True)
    if not isinstance(compaction, bool):
        reject("compaction", "compaction must be true or false")
    message: dict[str, Any] = {"user_text": text} if not content else {
        "content": ((TextPart(text=text),) if text else ()) + content}
    return TurnInput(provider=provider, model=model, system_prompt=prompt, **message,
                     turn_id=new_turn_id(),
                     tools=tuple(services.tools[n] for n in names), owner=owner,
                     context=TRIMMED if compaction else NO_COMPACTION,
                     settings=generation_settings(body.get("settings", {})),
                     replace_from=body.get("replace_from"),  # TurnInput checks it
                     client_key=client_key)


TRIMMED = ContextSettings(overflow=OverflowPolicy.TRIM)
NO_COMPACTION = ContextSettings(provider_compaction_enabled=False, overflow=OverflowPolicy.TRIM)
"""The server's chats go on past the model's window: a replay or local loop leaves the
oldest whole turns out of the request (never out of the chat) instead of aborting
``context_overflow`` every turn once the history outgrew it."""


SETTING_TYPES: dict[str, tuple[type, ...]] = {
    "max_output_tokens": (int,), "temperature": (int, float), "top_p": (int, float),
    "reasoning_effort": (str,), "reasoning_budget_tokens": (int,), "tool_choice": (str,),
    "stop": (list,), "parallel_tool_calls": (bool,), "seed": (int,),
    "response_format": (dict,)}
"""Each body setting's JSON types; ``GenerationSettings`` then checks the values (a
``response_format`` object's ``schema``, ``name`` and ``strict`` too: a 400 naming
``settings.response_format.FIELD``)."""


def generation_settings(raw: Any) -> GenerationSettings:
    """The body's ``settings`` object (``GenerationSettings`` fields) or a 400 naming the
    field; the engine then checks them against the provider and model (also a 400)."""
    if not isinstance(raw, dict):
        reject("settings", "settings must be an object")
    for key, value in raw.items():
        kinds = SETTING_TYPES.get(key)
        if kinds is None:
            reject(f"settings.{key}", f"unknown setting; known: {sorted(SETTING_TYPES)}")
        wrong_bool = isinstance(value, bool) and bool not in kinds
        if value is not None and (wrong_bool or not isinstance(value, kinds)):
            reject(f"settings.{key}", f"{key} has the wrong type")
    fields: dict[str, Any] = {k: tuple(v) if k == "stop" else v
                              for k, v in raw.items() if v is not None}  # null: not set
    if not fields:  # most turns: the shared, frozen "nothing set"
        return NO_SETTINGS
    return GenerationSettings(**fields)


def large_body(request: web.Request, services: Services) -> bool:
    """Whether a turn's body is a large one (``OwnerLimits.large_body``): longer than
    ``max_body_bytes`` as declared, or of no declared length (chunked)."""
    length = request.content_length
    return length > services.config.max_body_bytes if length is not None \
        else request.body_exists


@ROUTES.post("/api/chats/{chat_id}/turns")
async def post_turn(request: web.Request) -> web.StreamResponse:
    services, owner = services_of(request), request[OWNER]
    with services.limits.stream(owner), \
            services.limits.large_body(owner, large_body(request, services)) as slot:
        return await _post_turn(request, services, slot)  # 429s before the body is read


async def _post_turn(request: web.Request, services: Services,
                     slot: LargeSlot | None) -> web.StreamResponse:
    key = header_key(request)
    body = await read_json(request, limit=services.config.max_content_bytes)
    turn = turn_input(body, services, request[OWNER], key)
    shift = text_first(body)
    del body  # its base64 text: not held while the turn runs
    chat_id = request.match_info["chat_id"]
    TURN_OWNER.set(turn.owner)  # copied into the turn's task: scopes emulator faults
    # ChatNotFound / ChatBusy / InvalidInput surface here, as JSON, before any provider call.
    precondition = cut_check(request, services, chat_id, turn)
    try:
        live = await start_edit(services, chat_id, turn, slot, field=KEY_HEADER,
                                precondition=precondition)
    except InvalidInput as exc:
        raise body_field(exc, shift) from None
    except (MessageChanged, MessageNotFound):  # the place changed after the check
        if precondition is None or turn.replace_from is None:
            raise
        raise await refused_late(services, chat_id, turn.replace_from,
                                 request[OWNER]) from None
    except TurnKeyRecorded as found:  # a retry: the turn its key names, from its start
        following = await replayed(request, services, chat_id, found, turn)
        del turn
        return await stream(request, services, following, turn_id=found.turn_id,
                            headers={REPLAYED_HEADER: "true"})
    del turn  # its media are the engine's now, let go once sent (embed7)
    following = Following(notice=None, batches=live.follow_batches(0))
    return await stream(request, services, following, turn_id=live.turn_id,
                        cancel_on_leave=services.config.cancel_on_disconnect)
