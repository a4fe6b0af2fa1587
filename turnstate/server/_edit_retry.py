"""A retried edit runs nothing (edits10; see docs/server.md).

An edit is a keyed turn with ``replace_from``: ``POST /api/chats/{id}/turns`` with an
``Idempotency-Key`` and ``replace_from``, or an AI SDK ``sendMessage({text, messageId})``
(its key the edited message's id, which the SDK keeps across edits). Its begin cuts the
question it replaces, and with it the key that question held (``_sqlite_keys``), so the
store cannot tell a retry of the edit from a new one: the question the key names is the
one the first run put in the cut's place. This check, before the begin, can: the key names
a turn whose question sits exactly where the edit cuts, asks the same question (text and
number of images and files, as ``_replay`` compares), and nothing follows its answer. That
is the edit's own first run: the request is answered with it (``TurnKeyRecorded``, which
the routes answer as any retry, ``_replay``), nothing runs. The same check answers a begin
refused ``ChatBusy`` by that very turn (two copies of the edit at once).

Any other keyed edit that would cut the key's question: on ``/turns`` the key is the
client's name for one request, so it is ``422 idempotency_key_reused`` (send a new key); on
``/api/ui-messages`` the key is the message's id, which a second edit of the same message
sends again, so the edit runs and takes the key over (as before).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

import attrs

from turnstate.core import TextPart
from turnstate.core._errors import ChatBusy, TurnKeyRecorded
from turnstate.engine import TurnInput
from turnstate.engine._live import LiveTurn
from turnstate.server._http import ApiError
from turnstate.server._owner_limits import LargeSlot
from turnstate.server._services import Services
from turnstate.storage import CutExpected, ExpectedMessage
from turnstate.storage._records import message_ids


def _media_count(parts: Iterable[object]) -> int:
    return sum(not isinstance(p, TextPart) for p in parts)


async def edit_retry(services: Services, chat_id: str, turn: TurnInput, owner: str | None, *,
                     field: str | None) -> TurnKeyRecorded | None:
    """The turn a keyed edit's key names when the edit is a retry of it (see the module
    docstring), else None. ``field``: where a ``/turns`` request's key came (its other
    edits that would cut the key's question are ``422`` naming it); None on
    ``/api/ui-messages`` (they run). Nothing read for a turn without a key or a cut."""
    key, cut = turn.client_key, turn.replace_from
    keyed = getattr(services.store, "keyed_turn", None)
    if key is None or cut is None or keyed is None:
        return None
    return await _retry_of(services, chat_id, turn, owner, await keyed(chat_id, key),
                           field=field)


async def _retry_of(services: Services, chat_id: str, turn: TurnInput, owner: str | None,
                    turn_id: str | None, *, field: str | None) -> TurnKeyRecorded | None:
    """``edit_retry`` of the key's holder ``turn_id`` as read."""
    key, cut = turn.client_key, turn.replace_from
    if turn_id is None or key is None or cut is None:
        return None
    record = await services.store.load_turn(turn_id)
    if record.user_seq < cut:  # the begin finds it itself (TurnKeyRecorded)
        return None
    user_id, _ = message_ids(turn_id)
    window = (await services.store.load_messages(chat_id, limit=1, owner=owner)).messages
    newest = window[-1].seq if window else 0
    asked = (await services.store.load_messages(
        chat_id, limit=1, before_seq=record.user_seq + 1, owner=owner)).messages
    question = next((m for m in asked if m.id == user_id), None)
    same = question is not None and record.user_seq == cut \
        and newest <= max(record.assistant_seq, record.user_seq) \
        and question.text() == turn.user_text \
        and _media_count(question.parts) == _media_count(turn.user_parts)
    if same:
        return TurnKeyRecorded(chat_id, key, turn_id)
    if field is not None:
        raise ApiError(422, "idempotency_key_reused",
                       f"key {key!r} names a turn this edit would cut, which asked "
                       "another question or was followed since: send a new key",
                       field=field, extra={"turnId": turn_id})
    return None


_EDITING: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}
"""Per (chat, key): the lock a keyed edit's check and begin hold, and how many hold or wait
for it (the entry goes with the last)."""


@contextlib.asynccontextmanager
async def _one_edit(chat_id: str, key: str) -> AsyncIterator[None]:
    """Held over a keyed edit's check and begin: a copy of it waits, then finds the first
    run (never runs again because that run ended between its check and its begin)."""
    lock, holders = _EDITING.get((chat_id, key), (asyncio.Lock(), 0))
    _EDITING[chat_id, key] = lock, holders + 1
    try:
        async with lock:
            yield
    finally:
        lock, holders = _EDITING[chat_id, key]
        if holders == 1:
            del _EDITING[chat_id, key]
        else:
            _EDITING[chat_id, key] = lock, holders - 1


async def start_edit(services: Services, chat_id: str, turn: TurnInput,
                     slot: LargeSlot | None, *, field: str | None,
                     precondition: Callable[[], Awaitable[ExpectedMessage | None]] | None = None,
                     ) -> LiveTurn:
    """``services.start_turn``, but a retried edit raises ``TurnKeyRecorded`` naming its
    first run: its check and begin are held apart from those of its copies in this
    process (``_one_edit``), and a begin refused ``ChatBusy`` by that run (a copy started
    on another node) is checked again. The begin takes the key over only from the turn
    the check saw holding it (``CutExpected``, places12): a copy whose check came before
    the first run's begin on another node, and whose begin comes after that run ended,
    finds the key moved and is checked again (the first run's retry: answered with it).
    ``field`` as ``edit_retry``. ``precondition``: the request's own check of the place
    it cuts (``If-Match``), run just before the begin, after a retry was answered (a
    retry's place holds its first run's question); the message it passed is expected
    there by the begin's write."""
    if turn.client_key is None or turn.replace_from is None:
        message = None if precondition is None else await precondition()
        if message is not None:
            turn = attrs.evolve(turn, expect=CutExpected(message=message))
        return await services.start_turn(chat_id, turn, slot)
    key, keyed = turn.client_key, getattr(services.store, "keyed_turn", None)
    async with _one_edit(chat_id, key):
        for _ in range(KEY_CHECKS):
            holder = None if keyed is None else await keyed(chat_id, key)
            recorded = await _retry_of(services, chat_id, turn, turn.owner, holder,
                                       field=field)
            if recorded is not None:
                raise recorded
            message = None if precondition is None else await precondition()
            expect = CutExpected(message=message, key_holder=holder,
                                 key_checked=keyed is not None)
            try:
                return await services.start_turn(chat_id, attrs.evolve(turn, expect=expect),
                                                 slot)
            except ChatBusy as busy:
                recorded = await edit_retry(services, chat_id, turn, turn.owner, field=None)
                if recorded is None or recorded.turn_id != busy.active_turn_id:
                    raise
                raise recorded from None
            except TurnKeyRecorded as moved:
                if moved.turn_id == holder:  # the begin's own refusal: the key's turn
                    raise
                # the key changed hands since the check (a copy's run on another node)
    raise ApiError(409, "edit_conflict", "the edit's key kept changing hands while it "
                   "began: reload the chat and try again", field=field)


KEY_CHECKS = 3
"""Checks and begins of a keyed edit whose key another node's turn took in between."""
