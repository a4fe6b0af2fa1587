"""``MemoryStore``: the reference Store, rows in dictionaries, nothing on disk.

It keeps every row as the same column values ``SqliteStore`` writes (serialised JSON
text, fixed-width UTC timestamps), so tests can check invariants on its stored bytes,
and the conformance suite holds both backends to the same behaviour. A method never
awaits, so each one is atomic with respect to other tasks; each checks everything
before it changes anything, so a raised error leaves the rows as they were.

Where the protocol leaves room, both backends behave like this (the conformance suite
and a differential property test hold them to it):

- a turn's message ids are ``<turn id>:user`` and ``<turn id>:assistant``; seqs start at
  1 and a turn takes the next two after the highest stored seq;
- a lease has expired when ``expires_at <= now`` on the store's lease clock (a
  monotonic one, ``_lease_clock``, unless a wall ``clock`` is given alone); ``record_transition`` or
  ``commit_turn`` with a lease the chat no longer holds raise ``CommitConflict`` and
  write nothing; ``abort_turn`` then only marks what is still the turn's;
- ``abort_turn`` with no parts keeps the parts the turn already stored (its transition);
- every write to a chat row sets its ``updated_at`` (begin too); ``list_chats`` breaks
  ties by id, descending; ``list_turns`` is newest begun first;
- deleting a message leaves its turn's record (its message id becomes NULL).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from itertools import islice

from turnstate.core._content import check_edit_parts
from turnstate.core._context import part_chars
from turnstate.core._conversation import Message, Part
from turnstate.core._errors import (
    ChatAlreadyExists,
    ChatLimitReached,
    MessageNotFound,
    TurnNotFound,
)
from turnstate.storage._chat_search import check_query, matches
from turnstate.storage._commit_columns import (
    stored_chars,
)
from turnstate.storage._expected import ExpectedMessage, later_stamp
from turnstate.storage._lean import lean_message_from_row
from turnstate.storage._lean_message import LeanMessage
from turnstate.storage._media_part import MediaPart, check_index, media_item, media_part
from turnstate.storage._memory_quota import message_bytes
from turnstate.storage._memory_rows import _COMPLETED, _LOG, Row, _message_values, _turn_values
from turnstate.storage._memory_turns import MemoryTurns
from turnstate.storage._protocol import (
    ChatPosition,
    ChatRecord,
    LeanWindow,
    MessageWindow,
    TurnRecord,
)
from turnstate.storage._quota import text_bytes
from turnstate.storage._record_checks import check_limit, check_new_chat, check_title
from turnstate.storage._records import CLEAR_LOG, encode_parts, format_ts
from turnstate.storage._rows import (
    CHAT_COLUMNS,
    message_from_row,
    turn_from_row,
)
from turnstate.storage._window import check_window, select_window


class MemoryStore(MemoryTurns):
    """A Store in process memory: the reference backend and the engine tests' default.

    Args:
        clock: returns the current time (aware; naive values are taken as UTC).
        monotonic: the seconds leases run on (default ``time.monotonic``): no step of
            the wall clock moves a lease (``_lease_clock``). ``clock`` given alone keeps
            leases on ``clock``.
    """

    # -- chats and reads ---------------------------------------------------------------

    async def create_chat(self, *, owner: str, chat_id: str | None = None,
                          max_chats: int | None = None) -> ChatRecord:
        chat_id = uuid.uuid4().hex if chat_id is None else chat_id
        check_new_chat(chat_id, owner, max_chats)
        if chat_id in self._chats:
            raise ChatAlreadyExists(chat_id)
        if max_chats is not None and sum(
                row["owner"] == owner for row in self._chats.values()) >= max_chats:
            raise ChatLimitReached(owner, max_chats)
        now = self._now()
        row: Row = dict.fromkeys(CHAT_COLUMNS)
        row.update(id=chat_id, owner=owner, created_at=now, updated_at=now, version=0,
                   history_chars=0, lease_epoch=0)
        self._chats[chat_id] = row
        self._by_seq[chat_id] = {}
        self._chat_turns[chat_id] = []
        return self._record(row)

    async def load_chat(self, chat_id: str, *, owner: str | None = None) -> ChatRecord:
        return self._record(self._chat_row(chat_id, owner))

    async def rename_chat(self, chat_id: str, title: str | None, *,
                          owner: str | None = None) -> None:
        check_title(title)
        chat = self._chat_row(chat_id, owner)
        delta = text_bytes(title) - text_bytes(self._titles.get(chat_id))
        if delta > 0:
            self._refuse_over(chat["owner"], delta)
        self._grow(chat["owner"], delta)
        if title is None:
            self._titles.pop(chat_id, None)
        else:
            self._titles[chat_id] = title

    async def chat_titles(self, chat_ids: Sequence[str], *,
                          owner: str) -> dict[str, str]:
        return {chat_id: self._titles[chat_id] for chat_id in chat_ids
                if chat_id in self._titles and self._chats[chat_id]["owner"] == owner}

    async def list_chats(
        self, owner: str, *, limit: int | None = None, after: ChatPosition | None = None
    ) -> tuple[ChatRecord, ...]:
        check_limit(limit)
        rows = [row for row in self._chats.values() if row["owner"] == owner]
        if after is not None:
            mark = (format_ts(after.updated_at), after.id)
            rows = [row for row in rows if (row["updated_at"], row["id"]) < mark]
        rows.sort(key=lambda row: (row["updated_at"], row["id"]), reverse=True)
        return tuple(self._record(row) for row in rows[:limit])

    async def search_chats(
        self, owner: str, query: str, *, limit: int | None = None,
        after: ChatPosition | None = None,
    ) -> tuple[ChatRecord, ...]:
        check_limit(limit)
        needle = check_query(query)
        page = await self.list_chats(owner, after=after)
        # Newest first, stopping at the limit: a search no longer matches every chat of
        # the owner to keep the first ``limit`` (as SQLite's and PostgreSQL's stop).
        return tuple(islice((chat for chat in page if matches(
            self._titles.get(chat.id), next((row["parts"] for row in self._by_seq[chat.id].values()
                                             if row["role"] == "user"), None), needle)), limit))

    async def load_history(
        self, chat_id: str, *, owner: str | None = None
    ) -> tuple[Message, ...]:
        return tuple(message_from_row(_message_values(row))
                     for row in self._chat_messages(chat_id, owner)
                     if row["status"] == _COMPLETED)

    async def list_messages(
        self, chat_id: str, *, owner: str | None = None
    ) -> tuple[Message, ...]:
        return tuple(message_from_row(_message_values(row))
                     for row in self._chat_messages(chat_id, owner))

    async def load_messages(
        self, chat_id: str, *, limit: int, before_seq: int | None = None,
        after_seq: int | None = None, owner: str | None = None,
    ) -> MessageWindow:
        shown, more, total, turns = self._window(chat_id, limit, before_seq, after_seq, owner)
        return MessageWindow(
            messages=[message_from_row(_message_values(row)) for row in shown],
            more=more, total=total, turns=turns)

    async def load_messages_lean(
        self, chat_id: str, *, limit: int, before_seq: int | None = None,
        after_seq: int | None = None, owner: str | None = None,
    ) -> LeanWindow:
        shown, more, total, turns = self._window(chat_id, limit, before_seq, after_seq, owner)
        return LeanWindow(
            messages=[lean_message_from_row(_message_values(row)) for row in shown],
            more=more, total=total, turns=turns)

    async def list_messages_lean(
        self, chat_id: str, *, owner: str | None = None
    ) -> tuple[LeanMessage, ...]:
        return tuple(lean_message_from_row(_message_values(row))
                     for row in self._chat_messages(chat_id, owner))

    async def load_media_part(
        self, chat_id: str, seq: int, index: int, *, owner: str | None = None
    ) -> MediaPart | None:
        check_index(index)
        self._chat_row(chat_id, owner)
        row = self._by_seq[chat_id].get(seq)
        if row is None:
            raise MessageNotFound(chat_id, seq)
        item = media_item(row["parts"], index)  # only this part's base64 is decoded
        return None if item is None else media_part(item, None)

    def _window(self, chat_id: str, limit: int, before_seq: int | None,
                after_seq: int | None, owner: str | None
                ) -> tuple[list[Row], bool, int, list[TurnRecord]]:
        """``load_messages``' rows, whether more lie beyond, the count and the turns."""
        check_window(limit, before_seq, after_seq)
        rows = self._chat_messages(chat_id, owner)
        shown, more = select_window(rows, [row["seq"] for row in rows], limit, before_seq,
                                    after_seq)
        ids = {row["id"] for row in shown}
        turns = [self._turns[t] for t in self._chat_turns[chat_id]]
        return shown, more, len(rows), [turn_from_row(_turn_values(t)) for t in turns
                                        if t["assistant_message_id"] in ids]

    async def load_turn(self, turn_id: str) -> TurnRecord:
        row = self._turns.get(turn_id)
        if row is None:
            raise TurnNotFound(turn_id)
        return turn_from_row(_turn_values(row))

    async def list_turns(
        self, chat_id: str, *, limit: int | None = 20, owner: str | None = None
    ) -> tuple[TurnRecord, ...]:
        self._chat_row(chat_id, owner)
        check_limit(limit)
        ids = self._chat_turns[chat_id][::-1][:limit]
        return tuple(turn_from_row(_turn_values(self._turns[i])) for i in ids)

    # -- changes outside turns ---------------------------------------------------------

    async def clear_provider_state(
        self, chat_id: str, *, reason: str, owner: str | None = None
    ) -> None:
        self._bump(self._chat_row(chat_id, owner), self._now())
        _LOG.info(CLEAR_LOG, chat_id, reason)

    async def edit_message(
        self, chat_id: str, seq: int, parts: Sequence[Part], *, owner: str | None = None,
        expect: ExpectedMessage | None = None,
    ) -> None:
        check_edit_parts(parts)  # media a question could not hold: nothing written
        encoded = encode_parts(parts)
        chat = self._chat_row(chat_id, owner)  # owner, live lease, message: as the SQL
        self._refuse_live_lease(chat, self._lease_now())  # stores check them
        message = self._expected_at(chat_id, seq, expect)
        now = self._now()
        delta = text_bytes(encoded) - text_bytes(message["parts"])
        if delta > 0 and message["status"] == _COMPLETED:
            self._refuse_over(chat["owner"], delta)
        self._grow(chat["owner"], delta)
        if message["status"] == _COMPLETED:
            chat["history_chars"] += part_chars(parts) - stored_chars(message["parts"])
        message.update(parts=encoded, updated_at=later_stamp(now, message["updated_at"]))
        self._bump(chat, now)
        _LOG.info(CLEAR_LOG, chat_id, "history_edited")

    async def delete_message(self, chat_id: str, seq: int, *, owner: str | None = None) -> None:
        now = self._now()
        chat = self._chat_row(chat_id, owner)
        self._refuse_live_lease(chat, self._lease_now())
        self._drop_messages(chat_id, [self._message_at(chat_id, seq)])
        self._bump(chat, now)
        _LOG.info(CLEAR_LOG, chat_id, "history_deleted")

    async def delete_messages_from(
        self, chat_id: str, seq: int, *, owner: str | None = None,
        expect: ExpectedMessage | None = None,
    ) -> int:
        now = self._now()
        chat = self._chat_row(chat_id, owner)  # owner, then live lease, then message,
        self._refuse_live_lease(chat, self._lease_now())  # the order the SQL stores check
        self._expected_at(chat_id, seq, expect)
        return self._cut(chat, seq, now)

    def _expected_at(self, chat_id: str, seq: int, expect: ExpectedMessage | None) -> Row:
        """The message at ``seq`` (``MessageNotFound``), checked against ``expect``."""
        row = self._message_at(chat_id, seq)
        if expect is not None:
            expect.check(chat_id, seq, row["id"], row["status"], row["updated_at"])
        return row

    async def delete_chat(self, chat_id: str, *, owner: str | None = None) -> None:
        chat = self._chat_row(chat_id, owner)
        self._refuse_live_lease(chat, self._lease_now())
        gone = text_bytes(self._titles.pop(chat_id, None))
        for row in self._by_seq.pop(chat_id).values():
            del self._messages[row["id"]]
            gone += message_bytes(row)
        turn_ids = self._chat_turns.pop(chat_id)
        gone += self.turn_log.forget(turn_ids)
        for turn_id in turn_ids:
            del self._turns[turn_id]
        del self._chats[chat_id]
        self._grow(chat["owner"], -gone)
