"""The store conformance suite, runnable against any ``Store``: subclass
``StoreConformance`` in a test module (the class name must start with ``Test``) and give
it ``make_store(clock)``, an async context manager that opens a fresh, empty store using
``clock`` for every timestamp and lease::

    class TestMyStore(StoreConformance):
        def make_store(self, clock):
            return MyStore.open(":memory:", clock=clock)

Every check goes through the public ``Store`` protocol only. They cover the rules a
store gets wrong most easily: ``committed_seq`` and ``history_chars`` kept on the chat row
(a store that loses them turns every turn into a full replay), owners, the lease and
``ChatBusy``, ``CommitConflict`` and the order checks run in, what an abort keeps,
refusing stateless-loop state, cursors cleared by edits and deletes, expired leases, and
reading messages a window at a time (``load_messages``), and reading them without their
media bytes (``load_messages_lean``, ``list_messages_lean``; ``_store_suite_lean``),
and chat titles, the per-owner bound and search (``_store_suite_titles``), and the
media an edit may write (``_store_suite_edits``).
Needs pytest and pytest-asyncio (``pip install 'turnstate[dev]'``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import attrs
import pytest

from turnstate.core._context import part_chars
from turnstate.core._conversation import MessageStatus, TextPart, TransitionPart
from turnstate.core._errors import (
    ChatBusy,
    ChatNotFound,
    CommitConflict,
    ConfigurationError,
    LeaseLost,
    MessageNotFound,
    PersistenceRefused,
    TurnAlreadyRecorded,
    TurnNotFound,
)
from turnstate.core._media import FilePart, ImagePart
from turnstate.storage._protocol import (
    ChatRecord,
    MessageWindow,
    Store,
    TurnAbort,
    TurnStatus,
)
from turnstate.testing._records import (
    ManualClock,
    commit,
    committed_turn,
    cursor_of,
    loop_state,
    start,
)
from turnstate.testing._store_suite_edits import EditChecks
from turnstate.testing._store_suite_lean import LeanReads
from turnstate.testing._store_suite_titles import TitleChecks


async def counters_match_history(store: Store, chat_id: str) -> ChatRecord:
    """The chat's ``committed_seq`` and ``history_chars`` are what its history says."""
    chat = await store.load_chat(chat_id)
    history = await store.load_history(chat_id)
    expected_seq = history[-1].seq if history else None
    expected_chars = part_chars([part for message in history for part in message.parts])
    assert (chat.committed_seq, chat.history_chars) == (expected_seq, expected_chars), (
        f"committed_seq/history_chars are {(chat.committed_seq, chat.history_chars)}, "
        f"the history says {(expected_seq, expected_chars)}")
    return chat


@pytest.mark.asyncio
class StoreConformance(LeanReads, TitleChecks, EditChecks):
    """The checks every store must pass; subclass it and define ``make_store``."""

    def make_store(self, clock: ManualClock) -> contextlib.AbstractAsyncContextManager[Any]:
        """An async context manager opening a fresh, empty store that uses ``clock``."""
        raise NotImplementedError

    @contextlib.asynccontextmanager
    async def opened(self) -> AsyncIterator[tuple[Store, ManualClock]]:
        clock = ManualClock()
        async with self.make_store(clock) as store:
            yield store, clock

    async def test_chats_are_created_loaded_and_owned(self) -> None:
        async with self.opened() as (store, _):
            chat = await store.create_chat(owner="alice", chat_id="c1")
            assert (chat.id, chat.owner, chat.version) == ("c1", "alice", 0)
            assert (chat.committed_seq, chat.history_chars) == (None, 0)
            assert (await store.load_chat("c1", owner="alice")).id == "c1"
            for call in (store.load_chat("nope"), store.load_chat("c1", owner="bob"),
                         store.load_history("c1", owner="bob")):
                with pytest.raises(ChatNotFound):
                    await call
            other = await store.create_chat(owner="alice")
            assert other.id != "c1"
            assert {c.id for c in await store.list_chats("alice")} == {"c1", other.id}
            assert await store.list_chats("bob") == ()

    async def test_a_commit_keeps_committed_seq_and_history_chars(self) -> None:
        async with self.opened() as (store, _):
            await store.create_chat(owner="alice", chat_id="c1")
            first = await committed_turn(store, "c1", "t1", cursor="resp_1", text="hé 😀")
            assert (first.committed_seq, first.version) == (2, 1)
            assert cursor_of(first.last_provider_state) == "resp_1"
            assert await counters_match_history(store, "c1") == first
            second = await committed_turn(store, "c1", "t2", cursor="resp_2", reply="more")
            assert second.committed_seq == 4
            assert (await counters_match_history(store, "c1")).committed_seq == 4
            assert [m.seq for m in await store.load_history("c1")] == [1, 2, 3, 4]

    async def test_images_and_files_are_stored_with_the_user_message(self) -> None:
        """Inline bytes (a MiB of every byte value) and URLs come back identical, and the
        chat's ``history_chars`` counts them by their estimated tokens."""
        image = ImagePart(media_type="image/png", data=bytes(range(256)) * 4_096)
        parts = (TextPart(text="What is this?"), image,
                 ImagePart(url="https://example.com/cat.jpg", filename="cat.jpg"),
                 FilePart(data=b"%PDF-1.4 /Type /Page", filename="r\u00e9sum\u00e9.pdf"),
                 FilePart(url="https://example.com/paper.pdf"))
        async with self.opened() as (store, _):
            await store.create_chat(owner="alice", chat_id="c1")
            lease = await store.begin_turn("c1", attrs.evolve(start("t1"), user_parts=parts))
            await store.commit_turn(lease, commit("resp_1"))
            history = await store.load_history("c1")
            assert history[0].parts == parts
            assert history[0].text() == "What is this?"
            chat = await counters_match_history(store, "c1")
            assert chat.history_chars == part_chars(parts) + len("hi")
            assert chat.history_chars < len(image.data or b"")  # tokens, not bytes

    async def test_an_abort_keeps_the_counters_the_cursor_and_the_version(self) -> None:
        async with self.opened() as (store, _):
            await store.create_chat(owner="alice", chat_id="c1")
            before = await committed_turn(store, "c1", "t1", cursor="resp_1")
            lease = await store.begin_turn("c1", start("t2", "again"))
            produced = (TextPart(text="half an answer"),)
            await store.abort_turn(lease, TurnAbort(reason="provider_failed", parts=produced,
                                                    detail="HTTP 500"))
            chat = await counters_match_history(store, "c1")
            assert (chat.last_provider_state, chat.version, chat.active_turn_id) == (
                before.last_provider_state, 1, None)
            assert (chat.committed_seq, chat.history_chars) == (
                before.committed_seq, before.history_chars)
            listed = await store.list_messages("c1")
            assert [(m.seq, m.status) for m in listed[2:]] == [
                (3, MessageStatus.ABORTED), (4, MessageStatus.ABORTED)]
            assert listed[3].parts == produced
            turn = await store.load_turn("t2")
            assert (turn.status, turn.reason, turn.detail) == (
                TurnStatus.ABORTED, "provider_failed", "HTTP 500")
            after = await committed_turn(store, "c1", "t3")
            assert after.committed_seq == 6

    async def test_the_running_answer_lists_its_transition_parts(self) -> None:
        """When a degradation write's reply is lost, the engine reads the running answer
        back through ``list_messages``: it must list each part appended, once."""
        async with self.opened() as (store, _):
            await store.create_chat(owner="alice", chat_id="c1")
            await committed_turn(store, "c1", "t1", cursor="resp_1")
            lease = await store.begin_turn("c1", start("t2", "again"))
            first = TransitionPart(reason="model_changed", strategy="replay",
                                   source_state="validate")
            second = TransitionPart(reason="cursor_expired", strategy="replay",
                                    source_state="cursor")
            for part, clear in ((first, False), (second, True)):
                await store.record_transition(lease, part, clear_provider_state=clear)
            answer = next(m for m in await store.list_messages("c1")
                          if m.id == lease.assistant_message_id)
            assert (answer.status, answer.parts) == (MessageStatus.IN_PROGRESS,
                                                     (first, second))
            chat = await store.load_chat("c1")
            assert (chat.last_provider_state, chat.version) == (None, 1)

    async def test_a_live_lease_makes_a_second_turn_busy_before_writing(self) -> None:
        async with self.opened() as (store, clock):
            await store.create_chat(owner="alice", chat_id="c1")
            await store.begin_turn("c1", start("t1", lease_seconds=60))
            clock.advance(59)
            with pytest.raises(ChatBusy) as caught:
                await store.begin_turn("c1", start("t2"))
            assert (caught.value.chat_id, caught.value.active_turn_id) == ("c1", "t1")
            assert len(await store.list_messages("c1")) == 2
            with pytest.raises(ChatBusy):
                await store.delete_chat("c1")

    async def test_a_reused_turn_id_is_refused_after_the_lease_check(self) -> None:
        async with self.opened() as (store, _):
            for chat_id in ("c1", "c2"):
                await store.create_chat(owner="alice", chat_id=chat_id)
            await committed_turn(store, "c1", "t1")
            for chat_id in ("c1", "c2"):  # a retry of a recorded turn, or another chat's id
                with pytest.raises(TurnAlreadyRecorded):
                    await store.begin_turn(chat_id, start("t1"))
            await store.begin_turn("c1", start("t2"))
            with pytest.raises(ChatBusy):  # a retry of the running turn is busy first
                await store.begin_turn("c1", start("t2"))
            assert (len(await store.list_messages("c1")), await store.list_messages("c2")) == (
                4, ())

    async def test_a_lease_taken_over_is_lost_to_every_write_of_its_turn(self) -> None:
        async with self.opened() as (store, clock):
            await store.create_chat(owner="alice", chat_id="c1")
            first = await store.begin_turn("c1", start("t1", lease_seconds=10))
            renewed = await store.renew_lease(first, 20)
            assert renewed.expires_at == clock.now + timedelta(seconds=20)
            clock.advance(20)
            second = await store.begin_turn("c1", start("t2", lease_seconds=10))
            assert second.epoch != first.epoch
            assert (await store.load_turn("t1")).reason == "lease_expired"
            with pytest.raises(LeaseLost):
                await store.renew_lease(first, 10)
            with pytest.raises(CommitConflict):
                await store.commit_turn(first, commit("resp_1"))
            await store.abort_turn(first, TurnAbort(reason="lease_lost"))
            chat = await store.load_chat("c1")
            assert (chat.active_turn_id, chat.version, chat.committed_seq) == ("t2", 0, None)
            done = await store.commit_turn(second, commit("resp_2"))
            assert (done.committed_seq, cursor_of(done.last_provider_state)) == (4, "resp_2")

    async def test_an_edit_during_a_turn_is_busy_and_a_change_makes_its_commit_conflict(
            self) -> None:
        """A live lease refuses ``edit_message`` and ``delete_message`` (``ChatBusy``,
        nothing written; a store that takes them changes a running turn's history); a
        change the turn does not own (here the cursor's clear) still makes it conflict."""
        async with self.opened() as (store, clock):
            await store.create_chat(owner="alice", chat_id="c1")
            await committed_turn(store, "c1", "t1", cursor="resp_1")
            lease = await store.begin_turn("c1", start("t2", lease_seconds=10))
            for change in (store.edit_message("c1", 2, (TextPart(text="edited"),)),
                           store.delete_message("c1", 2), store.edit_message("c1", 99, ())):
                with pytest.raises(ChatBusy) as busy:
                    await change
                assert (busy.value.chat_id, busy.value.active_turn_id) == ("c1", "t2")
            chat = await store.load_chat("c1")
            assert (chat.version, cursor_of(chat.last_provider_state)) == (1, "resp_1")
            assert [m.text() for m in await store.list_messages("c1")][:2] == [
                "hello", "hi"]
            await store.clear_provider_state("c1", reason="test")
            with pytest.raises(CommitConflict) as caught:
                await store.commit_turn(lease, commit("resp_2"))
            assert (caught.value.expected_version, caught.value.actual_version) == (1, 2)
            chat = await counters_match_history(store, "c1")
            assert (chat.active_turn_id, chat.last_provider_state) == ("t2", None)
            await store.abort_turn(lease, TurnAbort(reason="commit_conflict"))
            assert (await store.load_chat("c1")).active_turn_id is None
            await store.begin_turn("c1", start("t3", lease_seconds=10))
            clock.advance(10)  # an expired lease holds nothing back
            await store.edit_message("c1", 2, (TextPart(text="edited"),))
            assert (await store.load_history("c1"))[1].text() == "edited"

    async def test_stateless_loop_state_is_refused_whole(self) -> None:
        async with self.opened() as (store, _):
            await store.create_chat(owner="alice", chat_id="c1")
            lease = await store.begin_turn("c1", start("t1"))
            with pytest.raises(PersistenceRefused):
                await store.commit_turn(lease, commit("resp_1", provider_state=loop_state()))
            chat = await store.load_chat("c1")
            assert (chat.version, chat.active_turn_id, chat.committed_seq) == (0, "t1", None)
            done = await store.commit_turn(lease, commit(None))
            assert (done.version, done.last_provider_state, done.committed_seq) == (1, None, 2)

    async def test_edits_and_deletes_clear_the_cursor_and_recount(self) -> None:
        async with self.opened() as (store, _):
            await store.create_chat(owner="alice", chat_id="c1")
            await committed_turn(store, "c1", "t1", cursor="resp_1")
            await committed_turn(store, "c1", "t2", cursor="resp_2")
            await store.edit_message("c1", 1, (TextPart(text="a much longer first message"),))
            chat = await counters_match_history(store, "c1")
            assert (chat.last_provider_state, chat.version) == (None, 3)
            await committed_turn(store, "c1", "t3", cursor="resp_3")
            await store.delete_message("c1", 6)
            chat = await counters_match_history(store, "c1")
            assert (chat.committed_seq, chat.last_provider_state) == (5, None)
            assert await store.delete_messages_from("c1", 3) == 3
            chat = await counters_match_history(store, "c1")
            assert chat.committed_seq == 2
            with pytest.raises(MessageNotFound):
                await store.edit_message("c1", 99, (TextPart(text="x"),))

    async def test_a_begin_with_replace_from_cuts_the_tail_in_its_own_write(self) -> None:
        """``TurnStart.replace_from`` (a regenerate): the begin deletes the messages from
        that seq on as ``delete_messages_from`` does, then takes the chat; a seq the chat
        does not hold is ``MessageNotFound`` and deletes nothing. A store that ignores
        the field makes every regenerate append instead of replace."""
        async with self.opened() as (store, _):
            await store.create_chat(owner="alice", chat_id="c1")
            await committed_turn(store, "c1", "t1", cursor="resp_1")
            before = await committed_turn(store, "c1", "t2", cursor="resp_2")
            with pytest.raises(MessageNotFound):
                await store.begin_turn("c1", attrs.evolve(start("t3"), replace_from=9))
            assert len(await store.list_messages("c1")) == 4
            lease = await store.begin_turn("c1", attrs.evolve(start("t3", "again"),
                                                              replace_from=3))
            assert (lease.user_seq, lease.base_version) == (3, before.version + 1)
            chat = await store.load_chat("c1")
            assert (chat.last_provider_state, chat.active_turn_id) == (None, "t3")
            assert [m.text() for m in await store.list_messages("c1")] == [
                "hello", "hi", "again", ""]
            assert (await counters_match_history(store, "c1")).committed_seq == 2
            assert (await store.commit_turn(lease, commit("resp_3"))).committed_seq == 4

    async def test_delete_from_checks_chat_then_lease_then_message(self) -> None:
        async with self.opened() as (store, _):
            await store.create_chat(owner="alice", chat_id="c1")
            await committed_turn(store, "c1", "t1")
            with pytest.raises(ChatNotFound):
                await store.delete_messages_from("c1", 99, owner="bob")
            await store.begin_turn("c1", start("t2"))
            with pytest.raises(ChatBusy):
                await store.delete_messages_from("c1", 99)
            assert len(await store.list_messages("c1")) == 4

    async def test_an_expired_lease_is_reclaimed_and_the_chat_freed(self) -> None:
        async with self.opened() as (store, clock):
            for chat_id in ("a", "b"):
                await store.create_chat(owner="alice", chat_id=chat_id)
            await committed_turn(store, "a", "a1", cursor="resp_a")
            await store.begin_turn("a", start("a2", lease_seconds=10))
            await store.begin_turn("b", start("b1", lease_seconds=100))
            clock.advance(10)
            assert await store.reclaim_expired() == 1
            assert await store.reclaim_expired() == 0
            turn = await store.load_turn("a2")
            assert (turn.status, turn.reason) == (TurnStatus.ABORTED, "lease_expired")
            chat = await counters_match_history(store, "a")
            assert (chat.active_turn_id, cursor_of(chat.last_provider_state)) == (None,
                                                                                  "resp_a")
            assert (await store.load_chat("b")).active_turn_id == "b1"
            await committed_turn(store, "a", "a3")

    async def test_turn_records_are_listed_newest_first_and_looked_up(self) -> None:
        async with self.opened() as (store, clock):
            await store.create_chat(owner="alice", chat_id="c1")
            for turn_id in ("t1", "t2", "t3"):
                await committed_turn(store, "c1", turn_id)
                clock.advance(1)
            assert [t.id for t in await store.list_turns("c1")] == ["t3", "t2", "t1"]
            assert [t.id for t in await store.list_turns("c1", limit=1)] == ["t3"]
            record = await store.load_turn("t2")
            assert (record.status, record.user_seq, record.assistant_seq) == (
                TurnStatus.COMPLETED, 3, 4)
            with pytest.raises(TurnNotFound):
                await store.load_turn("nope")

    async def test_messages_are_read_a_window_at_a_time(self) -> None:
        async with self.opened() as (store, clock):
            await store.create_chat(owner="alice", chat_id="c1")
            empty = await store.load_messages("c1", limit=5)
            assert (empty.messages, empty.more, empty.total, empty.turns) == ((), False, 0, ())
            for index in range(1, 6):
                await committed_turn(store, "c1", f"t{index}", text=f"q{index}")
                clock.advance(1)
            await store.abort_turn(await store.begin_turn("c1", start("t6")),
                                   TurnAbort(reason="cancelled"))

            def seqs(window: MessageWindow) -> list[int]:
                return [m.seq for m in window.messages]

            newest = await store.load_messages("c1", limit=4)
            assert (seqs(newest), newest.more, newest.total) == ([9, 10, 11, 12], True, 12)
            assert newest.messages[3].status is MessageStatus.ABORTED
            assert {t.id: t.assistant_seq for t in newest.turns} == {"t5": 10, "t6": 12}
            page = await store.load_messages("c1", limit=4, before_seq=9, owner="alice")
            assert (seqs(page), page.more) == ([5, 6, 7, 8], True)
            assert {t.id for t in page.turns} == {"t3", "t4"}
            first = await store.load_messages("c1", limit=10, before_seq=5)
            assert (seqs(first), first.more, first.messages[0].text()) == (
                [1, 2, 3, 4], False, "q1")
            oldest = await store.load_messages("c1", limit=3, after_seq=0)
            assert (seqs(oldest), oldest.more) == ([1, 2, 3], True)
            tail = await store.load_messages("c1", limit=5, after_seq=10)
            assert (seqs(tail), tail.more) == ([11, 12], False)
            await store.delete_messages_from("c1", 11)
            cut = await store.load_messages("c1", limit=2)
            assert (seqs(cut), cut.more, cut.total) == ([9, 10], True, 10)
            assert [t.id for t in cut.turns] == ["t5"]
            for call in (store.load_messages("c1", limit=1, owner="bob"),
                         store.load_messages("nope", limit=1)):
                with pytest.raises(ChatNotFound):
                    await call
            for bad in (store.load_messages("c1", limit=0),
                        store.load_messages("c1", limit=1, before_seq=3, after_seq=1)):
                with pytest.raises(ConfigurationError):
                    await bad

    async def test_deleting_a_chat_removes_it(self) -> None:
        async with self.opened() as (store, _):
            await store.create_chat(owner="alice", chat_id="c1")
            await committed_turn(store, "c1", "t1")
            await store.delete_chat("c1")
            with pytest.raises(ChatNotFound):
                await store.load_chat("c1")
            assert await store.list_chats("alice") == ()
