"""A retried turn request, answered with the turn its client key names (idem9).

A turn request may carry a client key: the ``Idempotency-Key`` header on ``POST
/api/chats/{id}/turns``, the sent user message's own id on ``POST /api/ui-messages``.
The store records it with the turn, unique in its chat (``TurnInput.client_key``). A
request whose key a turn of the chat already holds runs nothing and calls no provider:
its begin is refused ``TurnKeyRecorded`` before the chat is taken, and the request is
answered with that turn, followed from its first event (``TurnEngine.follow``: live while
it runs, from its log once it ended, its stored end once the log is gone), under that
turn's ``X-Turn-Id`` and ``Idempotent-Replayed: true``. The key must name the same
question: when the stored question's text or its number of images and files differs, the
answer is ``422 idempotency_key_reused``. A key names a question the chat still holds: once
deleted ("delete from here", an edit's cut), its key is free and the same request runs
anew (``409 idempotency_key_reused`` only when it was deleted between the begin and this
read). The other fields (provider, model, settings) are not compared: a retry is the
same request.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiohttp import web

from turnstate.core import TextPart
from turnstate.core._errors import TurnKeyRecorded
from turnstate.engine import TurnInput
from turnstate.engine._follow import Following
from turnstate.engine._turn_input import client_key_problem
from turnstate.server._http import OWNER, ApiError
from turnstate.server._services import Services
from turnstate.storage._records import message_ids

KEY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"


def header_key(request: web.Request) -> str | None:
    """The request's ``Idempotency-Key`` (None without one), or a 400 naming it. Two
    are a 400 too: the header holds one key (an item, not a list), and a request that
    carries two (a client library's own beside the application's) names no turn for
    sure: read first, a retry whose library minted a new key ran the turn again."""
    given = request.headers.getall(KEY_HEADER, [])
    if len(given) > 1:
        raise ApiError(400, "invalid_field", f"send one {KEY_HEADER} header, not "
                       f"{len(given)}", field=KEY_HEADER)
    key = given[0] if given else None
    if key is not None and (problem := client_key_problem(key)) is not None:
        raise ApiError(400, "invalid_field", problem[1], field=KEY_HEADER)
    return key


def _media_count(parts: Iterable[object]) -> int:
    return sum(not isinstance(p, TextPart) for p in parts)


async def replayed(request: web.Request, services: Services, chat_id: str,
                   found: TurnKeyRecorded, turn: TurnInput, *,
                   field: str = KEY_HEADER) -> Following:
    """The turn ``found`` names, followed from its first event, once its stored question
    is ``turn``'s; else the typed refusal (see the module docstring) naming ``field``,
    where the key came."""
    owner = request[OWNER]
    record = await services.store.load_turn(found.turn_id)
    user_id, _ = message_ids(found.turn_id)  # its seq is taken again once it is deleted
    messages = (await services.store.load_messages(
        chat_id, limit=1, before_seq=record.user_seq + 1, owner=owner)).messages
    question = next((m for m in messages if m.id == user_id), None)
    extra = {"turnId": found.turn_id}
    if question is None:
        raise ApiError(409, "idempotency_key_reused",
                       f"the turn key {found.key!r} named was deleted since: send a new key",
                       field=field, extra=extra)
    if question.text() != turn.user_text \
            or _media_count(question.parts) != _media_count(turn.user_parts):
        raise ApiError(422, "idempotency_key_reused",
                       f"key {found.key!r} names a turn that asked another question",
                       field=field, extra=extra)
    return await services.engine.follow(chat_id, found.turn_id, owner=owner)
