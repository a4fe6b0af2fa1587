"""``If-Match`` on ``PATCH`` and ``DELETE /api/chats/{id}/messages/{seq}`` (places11), and
on a turn that replaces a question (places12).

Both routes name a place (``seq``), which "delete from here" and a regenerate hand to
other messages, and an edit in place changes what the message there holds: a client whose
view is stale (another tab edited or deleted since) would change or delete a message it
never saw. A careful client sends the message's entity tag (``etag`` in the chat view:
``_views.message_etag``) as ``If-Match``; a message at ``seq`` that is not the one it
names, or no message there, is ``412 precondition_failed`` with the current message's
``messageId`` and ``etag`` (null when none), and nothing changes. Without the header the
routes behave as before. ``If-Match: *`` asks only that a message be there (RFC 9110
13.1.1); a weak tag (``W/"..."``) never matches (strong comparison).

The check reads the message, then the route writes; the write names the message checked
(``expected``, places12), which the store compares with the one there in the write itself:
another request's write between the two (another tab's, another node's) is
``MessageChanged`` there, answered as the same 412 (``refused``), nothing changed.
A turn that replaces a question (``replace_from``) takes ``If-Match`` too (``cut_check``).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from aiohttp import web

from turnstate.core import Message
from turnstate.engine import TurnInput
from turnstate.server._http import ApiError, reject
from turnstate.server._services import Services
from turnstate.server._views import message_etag
from turnstate.storage import ExpectedMessage, LeanMessage

HEADER = "If-Match"
_TAG = re.compile(r'\s*(W/)?("[\x21\x23-\x7e\x80-\xff]*")\s*(?:,|$)')


def wanted_tags(request: web.Request) -> frozenset[str] | None:
    """The strong entity tags ``If-Match`` names (``{"*"}`` for any), None without the
    header; a malformed one is ``400 invalid_field`` naming it (it is never ignored: a
    client that sent one asked for the check)."""
    given = request.headers.getall(HEADER, [])
    if not given:
        return None
    raw = ",".join(given).strip()
    if not raw:
        reject(HEADER, "If-Match must not be empty")
    if raw == "*":
        return frozenset({"*"})
    tags, at = set(), 0
    while at < len(raw):
        match = _TAG.match(raw, at)
        if match is None or match.end() == at:
            reject(HEADER, 'If-Match must be "*" or entity tags ("...", as the chat '
                   "view's etag), separated by commas")
        if match.group(1) is None:  # a weak tag never matches (strong comparison)
            tags.add(match.group(2))
        at = match.end()
    return frozenset(tags)


def check_place(wanted: frozenset[str] | None, seq: int,
                current: LeanMessage | None) -> None:
    """``412 precondition_failed`` unless ``current`` (the message at ``seq``, or None)
    is one ``wanted`` names; nothing when the request sent no ``If-Match``."""
    if wanted is None:
        return
    etag = None if current is None else message_etag(current)
    if etag is not None and ("*" in wanted or etag in wanted):
        return
    raise refused(seq, current)


def expected(wanted: frozenset[str] | None,
             current: Message | LeanMessage | None) -> ExpectedMessage | None:
    """What the write is to find at the place: the message ``check_place`` passed when
    the request named it by its tag (``*`` names any message, so nothing is expected)."""
    if wanted is None or "*" in wanted or current is None:
        return None
    return ExpectedMessage.of(current)


async def refused_late(services: Services, chat_id: str, seq: int,
                       owner: str) -> ApiError:
    """The 412 of a write the store refused (``MessageChanged``, or ``MessageNotFound``
    for a message deleted) after the check passed: another write landed between."""
    return refused(seq, await message_at(services, chat_id, seq, owner))


def refused(seq: int, current: LeanMessage | None) -> ApiError:
    """``412 precondition_failed`` naming the message at ``seq`` now (or none)."""
    etag = None if current is None else message_etag(current)
    return ApiError(412, "precondition_failed",
                    f"message {seq} is not the one this client named (another tab edited "
                    "or deleted it since): reload the chat" if current is not None else
                    f"there is no message {seq} any more (another tab deleted it): reload "
                    "the chat", field=HEADER,
                    extra={"seq": seq, "messageId": None if current is None else current.id,
                           "etag": etag})


def cut_check(request: web.Request, services: Services, chat_id: str,
              turn: TurnInput) -> Callable[[], Awaitable[ExpectedMessage | None]] | None:
    """The check of a turn's ``If-Match``, which names the question its ``replace_from``
    cuts (a regenerate's or a retry's place, places12): run just before the turn's begin
    (``_edit_retry.start_edit``), ``412`` as ``check_place``, and the message it passed
    then expected by the begin's own write (``CutExpected``: another request's write
    between the two is ``MessageChanged``, the same 412); None without the header. A turn
    that cuts nothing names no place: its ``If-Match`` is ``400``."""
    wanted = wanted_tags(request)
    if wanted is None:
        return None
    seq = turn.replace_from
    if seq is None:
        reject(HEADER, "If-Match names the message a turn replaces: send it with "
               "replace_from")

    async def check() -> ExpectedMessage | None:
        """The message the turn's begin is to find at the cut (``expected``)."""
        current = await message_at(services, chat_id, seq, turn.owner or "")
        check_place(wanted, seq, current)
        return expected(wanted, current)

    return check


async def message_at(services: Services, chat_id: str, seq: int,
                     owner: str) -> LeanMessage | None:
    """The message at ``seq``, read without its bytes, or None."""
    found = (await services.store.load_messages_lean(chat_id, limit=1, before_seq=seq + 1,
                                                     owner=owner)).messages
    return found[0] if found and found[0].seq == seq else None
