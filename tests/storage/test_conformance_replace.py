"""Conformance, replace: ``begin_turn`` with ``TurnStart.replace_from`` cuts the chat's
tail in the write that takes the lease.

It does what ``delete_messages_from`` then ``begin_turn`` did (the server's regenerate),
in one transaction: another turn can no longer take the chat between the two and leave
the question deleted, and a refused begin deletes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.storage.support import (
    Backend,
    abort,
    assert_counters_match_history,
    commit,
    committed_turn,
    cursor_of,
    start,
)
from turnstate.core._conversation import MessageStatus, TextPart
from turnstate.core._errors import ChatBusy, ChatNotFound, MessageNotFound, TurnAlreadyRecorded
from turnstate.storage import TurnStatus


async def _snapshot(backend: Backend) -> dict[str, list[dict[str, Any]]]:
    return {table: await backend.raw_rows(table) for table in ("chats", "messages", "turns")}


async def _three_turns(backend: Backend) -> Any:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    chat = None
    for index in range(3):
        chat = await committed_turn(store, "c1", f"t{index}", cursor=f"resp_{index}",
                                    text=f"q{index}", reply=f"a{index}")
    return chat


async def test_a_replacing_begin_cuts_the_tail_and_takes_the_chat(backend: Backend) -> None:
    """Right after a commit (SQLite's one-statement begin would apply): the messages from
    the seq on go as ``delete_messages_from`` takes them (cursor cleared, version bumped,
    counters recomputed, turn records kept without their message ids), and the new
    question takes the seq it replaces, on a lease of the bumped version."""
    store = backend.store
    chat = await _three_turns(backend)
    assert cursor_of(chat.last_provider_state) == "resp_2"
    lease = await store.begin_turn("c1", start("t3", "q1 again", replace_from=3),
                                   owner="alice")
    assert (lease.user_seq, lease.assistant_seq) == (3, 4)
    assert lease.base_version == chat.version + 1
    after = await store.load_chat("c1")
    assert after.version == chat.version + 1 and after.last_provider_state is None
    assert after.active_turn_id == "t3"
    if lease.chat is not None:
        assert lease.chat == after
    assert (after.committed_seq, after.history_chars) == (2, len("q0a0"))
    messages = await store.list_messages("c1")
    assert [(m.seq, m.text(), m.status) for m in messages] == [
        (1, "q0", MessageStatus.COMPLETED), (2, "a0", MessageStatus.COMPLETED),
        (3, "q1 again", MessageStatus.IN_PROGRESS), (4, "", MessageStatus.IN_PROGRESS)]
    turns = {t.id: t for t in await store.list_turns("c1")}
    assert set(turns) == {"t0", "t1", "t2", "t3"}  # the audit stays
    assert turns["t1"].assistant_message_id is None is turns["t2"].assistant_message_id
    rows = {r["id"]: r for r in await backend.raw_rows("turns")}
    assert rows["t1"]["user_message_id"] is None and rows["t0"]["user_message_id"]
    # The lease is good: its commit goes through and the counters follow.
    committed = await store.commit_turn(lease, commit("resp_3",
                                                      parts=(TextPart(text="a1 again"),)))
    assert committed.version == chat.version + 2
    assert [m.text() for m in await store.load_history("c1")] == ["q0", "a0", "q1 again",
                                                                  "a1 again"]
    await assert_counters_match_history(store, "c1")


async def test_a_replacing_begin_from_an_answer_keeps_the_question_before_it(
        backend: Backend) -> None:
    """Any seq: replacing from an answer leaves its question, the new one follows it."""
    store = backend.store
    await _three_turns(backend)
    lease = await store.begin_turn("c1", start("t3", "instead", replace_from=6))
    assert lease.user_seq == 6
    assert [m.text() for m in await store.list_messages("c1")][4:] == ["q2", "instead", ""]
    await assert_counters_match_history(store, "c1")


async def test_a_replacing_begin_checks_in_begins_order_and_writes_nothing(
        backend: Backend) -> None:
    """ChatNotFound (also another owner's), ChatBusy, TurnAlreadyRecorded, then
    MessageNotFound: where several apply, every backend gives the same one, and no row
    moves (the question stays)."""
    store = backend.store
    await _three_turns(backend)
    idle = await _snapshot(backend)
    with pytest.raises(ChatNotFound):
        await store.begin_turn("c1", start("t9", replace_from=99), owner="mallory")
    with pytest.raises(ChatNotFound):
        await store.begin_turn("nope", start("t9", replace_from=1))
    with pytest.raises(TurnAlreadyRecorded):
        await store.begin_turn("c1", start("t1", replace_from=99))
    for missing in (99, 7, 0, -1, 2**40):
        with pytest.raises(MessageNotFound) as refused:
            await store.begin_turn("c1", start("t9", replace_from=missing))
        assert refused.value.seq == missing
    assert await _snapshot(backend) == idle
    lease = await store.begin_turn("c1", start("t4", lease_seconds=60))
    running = await _snapshot(backend)
    with pytest.raises(ChatBusy):
        await store.begin_turn("c1", start("t1", replace_from=99), owner="alice")
    with pytest.raises(ChatBusy):
        await store.begin_turn("c1", start("t9", replace_from=3))
    assert await _snapshot(backend) == running
    await store.abort_turn(lease, abort())
    # The id of a turn refused above was never recorded: it can begin now.
    await store.begin_turn("c1", start("t9", replace_from=3))


async def test_a_replacing_begin_reclaims_an_expired_turn_it_cuts(backend: Backend) -> None:
    """An expired lease is reclaimed (its record aborted ``lease_expired``) and, when its
    messages lie in the cut, they go too; the chat is the new turn's."""
    store = backend.store
    await _three_turns(backend)
    await store.begin_turn("c1", start("t3", "stuck", lease_seconds=10))
    backend.clock.advance(60)
    lease = await store.begin_turn("c1", start("t4", "q2 again", replace_from=5))
    assert lease.user_seq == 5
    stuck = await store.load_turn("t3")
    assert (stuck.status, stuck.reason) == (TurnStatus.ABORTED, "lease_expired")
    assert stuck.assistant_message_id is None
    assert [m.text() for m in await store.list_messages("c1")] == [
        "q0", "a0", "q1", "a1", "q2 again", ""]
    assert (await store.load_chat("c1")).active_turn_id == "t4"
    await store.commit_turn(lease, commit())
    await assert_counters_match_history(store, "c1")


async def test_a_begin_without_replace_from_deletes_nothing(backend: Backend) -> None:
    """None (the default) is an ordinary begin: nothing is cut, the cursor and the
    version stay."""
    store = backend.store
    chat = await _three_turns(backend)
    lease = await store.begin_turn("c1", start("t3", replace_from=None))
    assert (lease.user_seq, lease.base_version) == (7, chat.version)
    assert cursor_of((await store.load_chat("c1")).last_provider_state) == "resp_2"
