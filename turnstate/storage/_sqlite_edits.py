"""SQLite statements of the changes outside turns: a message edited or deleted, the messages
from a seq on, a chat (each checks the owner and the live lease, and keeps the chat's
counters); an edit and a delete from a seq compare the message there with the one the
caller expects (``_expected``) in the same transaction."""

from __future__ import annotations

from turnstate.core._errors import ChatBusy, ChatNotFound, MessageNotFound
from turnstate.storage._commit_columns import stored_chars
from turnstate.storage._expected import ExpectedMessage, later_stamp
from turnstate.storage._sqlite_sql import Conn, bump_version
from turnstate.storage._window import held_seq

SELECT_MESSAGE = "SELECT status, parts FROM messages WHERE chat_id = ? AND seq = ?"
SELECT_EXPECTED = "SELECT id, status, updated_at FROM messages WHERE chat_id = ? AND seq = ?"
EDIT = "UPDATE messages SET parts = ?, updated_at = ? WHERE chat_id = ? AND seq = ?"
DELETE = "DELETE FROM messages WHERE chat_id = ? AND seq = ?"
ADD_CHARS = "UPDATE chats SET history_chars = history_chars + ? WHERE id = ?"
RECOUNT_SEQ = """UPDATE chats SET committed_seq = (SELECT seq FROM messages
    WHERE chat_id = ? AND status = 'completed' ORDER BY seq DESC LIMIT 1) WHERE id = ?"""


def _committed_chars(conn: Conn, chat_id: str, seq: int) -> int:
    """The ``history_chars`` of the message at ``seq``; -1 when it is not committed."""
    row = conn.execute(SELECT_MESSAGE, (chat_id, held_seq(seq))).fetchone()
    if row is None:
        raise MessageNotFound(chat_id, seq)
    status, parts = row
    return stored_chars(parts) if status == "completed" else -1


def edit_message(conn: Conn, chat_id: str, seq: int, now: str, *, parts: str, chars: int,
                 owner: str | None = None, leased_at: str | None = None,
                 expect: ExpectedMessage | None = None) -> None:
    """Replace the parts at ``seq``; a committed message's count moves to the new parts,
    its ``updated_at`` strictly later than before (``later_stamp``). Refused
    (``ChatBusy``) while a live lease holds the chat, ``MessageChanged`` when the message
    is not the one ``expect`` names."""
    refuse_live_lease(conn, chat_id, leased_at or now, owner)
    last = expected_at(conn, chat_id, seq, expect)
    bump_version(conn, chat_id, now)
    old = _committed_chars(conn, chat_id, seq)
    conn.execute(EDIT, (parts, later_stamp(now, last), chat_id, seq))
    if old >= 0:
        conn.execute(ADD_CHARS, (chars - old, chat_id))


def delete_message(conn: Conn, chat_id: str, seq: int, now: str,
                   owner: str | None = None, *, leased_at: str | None = None) -> None:
    """Delete the message at ``seq``; a committed one leaves the chat's counters.
    Refused (``ChatBusy``) while a live lease holds the chat."""
    refuse_live_lease(conn, chat_id, leased_at or now, owner)
    bump_version(conn, chat_id, now)
    old = _committed_chars(conn, chat_id, seq)
    conn.execute(DELETE, (chat_id, seq))
    if old >= 0:
        conn.execute(ADD_CHARS, (-old, chat_id))
        conn.execute(RECOUNT_SEQ, (chat_id, chat_id))


def refuse_live_lease(conn: Conn, chat_id: str, leased_at: str, owner: str | None) -> None:
    """``ChatNotFound`` as ``check_owner``; ``ChatBusy`` while a live lease is held (its
    expiry after ``leased_at``, now on the store's lease clock; ``now`` where none is
    given)."""
    row = conn.execute("SELECT owner, active_turn_id, active_turn_expires_at FROM chats "
                       "WHERE id = ?", (chat_id,)).fetchone()
    if row is None or (owner is not None and row[0] != owner):
        raise ChatNotFound(chat_id)
    if row[1] is not None and row[2] > leased_at:
        raise ChatBusy(chat_id, row[1])


def expected_at(conn: Conn, chat_id: str, seq: int, expect: ExpectedMessage | None) -> str:
    """The ``updated_at`` of the message at ``seq`` (``MessageNotFound`` when none),
    checked against ``expect`` (``MessageChanged``)."""
    row = conn.execute(SELECT_EXPECTED, (chat_id, held_seq(seq))).fetchone()
    if row is None:
        raise MessageNotFound(chat_id, seq)
    if expect is not None:
        expect.check(chat_id, seq, row[0], row[1], row[2])
    stamp: str = row[2]
    return stamp


def delete_from(conn: Conn, chat_id: str, seq: int, now: str, owner: str | None, *,
                leased_at: str | None = None, expect: ExpectedMessage | None = None) -> int:
    refuse_live_lease(conn, chat_id, leased_at or now, owner)
    expected_at(conn, chat_id, seq, expect)
    bump_version(conn, chat_id, now)
    chars = sum(stored_chars(parts) for (parts,) in conn.execute(
        "SELECT parts FROM messages WHERE chat_id = ? AND seq >= ? AND status = 'completed'",
        (chat_id, seq)))
    deleted: int = conn.execute("DELETE FROM messages WHERE chat_id = ? AND seq >= ?",
                                (chat_id, seq)).rowcount
    conn.execute(ADD_CHARS, (-chars, chat_id))
    conn.execute(RECOUNT_SEQ, (chat_id, chat_id))
    return deleted


def delete_chat(conn: Conn, chat_id: str, now: str, owner: str | None, *,
                leased_at: str | None = None) -> None:
    refuse_live_lease(conn, chat_id, leased_at or now, owner)
    for table, column in (("turns", "chat_id"), ("messages", "chat_id"),
                          ("chat_titles", "chat_id"), ("chats", "id")):
        conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (chat_id,))
