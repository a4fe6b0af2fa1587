"""Conformance, expected message (places12): an edit or a delete from a seq that names the
message it read there (``ExpectedMessage``) is compared with the stored one in its own
write, so another write that lands between the caller's read and its write is seen:
``MessageChanged`` naming the message there now, nothing written.

A begin that cuts (``TurnStart.replace_from``) takes a ``CutExpected`` alike: the
message read at the cut, and the turn read holding its client key (a copy of a keyed edit
on another node never cuts the edit's own run).

The manual clock does not move between the writes here: an edit is still told from the
message before it (its stamp is strictly later than the message's last change).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.storage.support import Backend, commit, committed_turn, start
from turnstate.core._conversation import Message, MessageStatus, TextPart
from turnstate.core._errors import MessageChanged, MessageNotFound, TurnKeyRecorded
from turnstate.storage import CutExpected, ExpectedMessage


async def _snapshot(backend: Backend) -> dict[str, list[dict[str, Any]]]:
    return {table: await backend.raw_rows(table) for table in ("chats", "messages", "turns")}


async def _two_turns(backend: Backend) -> None:
    await backend.store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(backend.store, "c1", "t0", text="q0", reply="a0")
    await committed_turn(backend.store, "c1", "t1", text="q1", reply="a1")


async def _at(backend: Backend, seq: int) -> Message:
    found: Message = next(m for m in await backend.store.list_messages("c1") if m.seq == seq)
    return found


async def test_an_edit_expecting_the_message_read_is_refused_after_another_edit(
        backend: Backend) -> None:
    """Tab B read question 1; tab A's edit landed (same clock time); B's edit is refused."""
    store = backend.store
    await _two_turns(backend)
    read = await _at(backend, 1)
    await store.edit_message("c1", 1, (TextPart(text="tab A's"),), owner="alice")
    edited = await _at(backend, 1)
    assert edited.updated_at > read.updated_at  # the clock did not move
    before = await _snapshot(backend)
    with pytest.raises(MessageChanged) as refused:
        await store.edit_message("c1", 1, (TextPart(text="tab B's"),), owner="alice",
                                 expect=ExpectedMessage.of(read))
    assert (refused.value.chat_id, refused.value.seq, refused.value.message_id) == (
        "c1", 1, read.id)
    assert await _snapshot(backend) == before
    await store.edit_message("c1", 1, (TextPart(text="tab B's"),), owner="alice",
                             expect=ExpectedMessage.of(edited))  # what is there now
    assert (await _at(backend, 1)).text() == "tab B's"


async def test_a_delete_expecting_the_message_read_is_refused_after_its_place_changed(
        backend: Backend) -> None:
    """Question 3 was deleted and another asked in its place: the same seq, another id."""
    store = backend.store
    await _two_turns(backend)
    read = await _at(backend, 3)
    await store.delete_messages_from("c1", 3, owner="alice")
    await committed_turn(store, "c1", "t2", text="q2", reply="a2")
    before = await _snapshot(backend)
    with pytest.raises(MessageChanged) as refused:
        await store.delete_messages_from("c1", 3, owner="alice",
                                         expect=ExpectedMessage.of(read))
    assert refused.value.message_id == "t2:user" != read.id
    assert await _snapshot(backend) == before
    with pytest.raises(MessageChanged):  # an edit expecting it alike
        await store.edit_message("c1", 3, (TextPart(text="x"),), owner="alice",
                                 expect=ExpectedMessage.of(read))
    assert await _snapshot(backend) == before


async def test_a_change_expecting_the_message_there_is_written(backend: Backend) -> None:
    store = backend.store
    await _two_turns(backend)
    first, answer = await _at(backend, 1), await _at(backend, 4)
    assert answer.status is MessageStatus.COMPLETED
    await store.edit_message("c1", 1, (TextPart(text="again"),), owner="alice",
                             expect=ExpectedMessage.of(first))
    assert (await _at(backend, 1)).text() == "again"
    deleted = await store.delete_messages_from("c1", 4, owner="alice",
                                               expect=ExpectedMessage.of(answer))
    assert deleted == 1 and [m.seq for m in await store.list_messages("c1")] == [1, 2, 3]


async def test_an_expected_message_gone_is_message_not_found(backend: Backend) -> None:
    store = backend.store
    await _two_turns(backend)
    read = await _at(backend, 3)
    await store.delete_messages_from("c1", 3, owner="alice")
    with pytest.raises(MessageNotFound):
        await store.delete_messages_from("c1", 3, owner="alice",
                                         expect=ExpectedMessage.of(read))
    with pytest.raises(MessageNotFound):
        await store.edit_message("c1", 3, (TextPart(text="x"),), owner="alice",
                                 expect=ExpectedMessage.of(read))


async def test_each_edit_is_stamped_later_than_the_last_on_a_still_clock(
        backend: Backend) -> None:
    """Two edits at one clock time: each stamp is later, so each read tells them apart."""
    store = backend.store
    await _two_turns(backend)
    stamps = []
    for text in ("one", "two", "three"):
        await store.edit_message("c1", 1, (TextPart(text=text),), owner="alice")
        stamps.append((await _at(backend, 1)).updated_at)
    assert stamps == sorted(set(stamps))


async def test_a_cutting_begin_expecting_the_message_read_is_refused_after_an_edit(
        backend: Backend) -> None:
    """A regenerate read question 3; another tab's edit landed before its begin."""
    store = backend.store
    await _two_turns(backend)
    read = await _at(backend, 3)
    await store.edit_message("c1", 3, (TextPart(text="edited"),), owner="alice")
    before = await _snapshot(backend)
    expect = CutExpected(message=ExpectedMessage.of(read))
    with pytest.raises(MessageChanged) as refused:
        await store.begin_turn("c1", start("t2", "q1 again", replace_from=3, expect=expect),
                               owner="alice")
    assert refused.value.message_id == read.id
    assert await _snapshot(backend) == before
    now = CutExpected(message=ExpectedMessage.of(await _at(backend, 3)))
    lease = await store.begin_turn("c1", start("t2", "q1 again", replace_from=3, expect=now),
                                   owner="alice")
    assert lease.user_seq == 3


async def test_a_keyed_cut_takes_the_key_over_only_from_the_turn_read(
        backend: Backend) -> None:
    """A copy of a keyed edit checked when t0 held the key; the edit ran since (t2 holds
    it, at the cut's seq): the copy's begin names t2 and writes nothing."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t0", "q0", client_key="k"), owner="alice")
    await store.commit_turn(lease, commit(None))
    expect = CutExpected(key_holder="t0", key_checked=True)
    lease = await store.begin_turn(
        "c1", start("t2", "q0, edited", replace_from=1, client_key="k", expect=expect),
        owner="alice")  # the edit's first run: t0 held the key as read
    await store.commit_turn(lease, commit(None))
    before = await _snapshot(backend)
    with pytest.raises(TurnKeyRecorded) as moved:
        await store.begin_turn(
            "c1", start("t3", "q0, edited", replace_from=1, client_key="k", expect=expect),
            owner="alice")
    assert moved.value.turn_id == "t2"
    assert await _snapshot(backend) == before
    free = CutExpected(key_holder=None, key_checked=True)
    with pytest.raises(TurnKeyRecorded) as taken:  # read free, held since
        await store.begin_turn(
            "c1", start("t3", "q0, edited", replace_from=1, client_key="k", expect=free),
            owner="alice")
    assert taken.value.turn_id == "t2"
    now = CutExpected(key_holder="t2", key_checked=True)
    lease = await store.begin_turn(
        "c1", start("t3", "q0, again", replace_from=1, client_key="k", expect=now),
        owner="alice")
    assert lease.user_seq == 1
