"""Conformance, part 2: history contents, edits and deletes, raw rows, reopening."""

from __future__ import annotations

import logging
import time

import pytest

from tests.storage.support import (
    Backend,
    abort,
    audit,
    commit,
    committed_turn,
    cursor_of,
    start,
)
from turnstate.core._conversation import MessageStatus, TextPart
from turnstate.core._errors import ChatNotFound, CommitConflict, MessageNotFound
from turnstate.storage import TurnStatus

AWKWARD_TEXTS = [
    "",
    "plain",
    "日本語 ünïcödé",
    "astral 😀 𝄞 𐍈",
    "nul \x00 inside \x00",
    "controls \x01\x1f\x7f and \u2028 \u2029",
    'quotes " \\ and a fake "}] end',
    "lone surrogate-free \ufeff BOM and \uffff",
    "x" * 1_000_000,
]


async def test_awkward_texts_round_trip(backend: Backend) -> None:
    """Unicode (astral too), NUL, controls, quotes, empty and 1 MB texts come back equal."""
    store = backend.store
    await store.create_chat(owner="ünïcödé 😀", chat_id="chat \x00 😀")
    for index, text in enumerate(AWKWARD_TEXTS):
        await committed_turn(store, "chat \x00 😀", f"t{index}", text=text, reply=text[::-1])
    history = await store.load_history("chat \x00 😀")
    assert [m.text() for m in history[0::2]] == AWKWARD_TEXTS
    assert [m.text() for m in history[1::2]] == [t[::-1] for t in AWKWARD_TEXTS]
    assert [c.id for c in await store.list_chats("ünïcödé 😀")] == ["chat \x00 😀"]


async def test_ten_thousand_message_history(backend: Backend) -> None:
    """A 10,000-message history, committed through the protocol, loads whole and in order."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="big")
    await store.create_chat(owner="alice", chat_id="other")
    began = time.perf_counter()
    for index in range(5_000):
        await committed_turn(store, "big", f"t{index}", text=f"q{index}", reply=f"a{index}")
    await committed_turn(store, "other", "x")
    history = await store.load_history("big")
    elapsed = time.perf_counter() - began
    assert [m.seq for m in history] == list(range(1, 10_001))
    assert history[-1].text() == "a4999" and history[0].text() == "q0"
    assert (await store.load_chat("big")).version == 5_000
    assert len(await store.load_history("other")) == 2
    # A hang guard, not a benchmark: 5,001 turns are 10,002 PostgreSQL transactions, each
    # with its fsync, 45 s on a quiet 2-core machine and over 80 s under load.
    assert elapsed < 240, f"{backend.name}: {elapsed:.1f}s"


async def test_chats_are_isolated(backend: Backend) -> None:
    """Turns, leases, versions, seqs and cursors of one chat never touch another."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="a")
    await store.create_chat(owner="alice", chat_id="b")
    await committed_turn(store, "a", "a1", cursor="resp_a")
    lease_b = await store.begin_turn("b", start("b1"))
    lease_a = await store.begin_turn("a", start("a2"))
    assert (lease_a.user_seq, lease_b.user_seq) == (3, 1)
    await store.clear_provider_state("a", reason="test")  # a's change, under a's lease
    await store.commit_turn(lease_b, commit("resp_b"))
    with pytest.raises(CommitConflict):
        await store.commit_turn(lease_a, commit("resp_a2"))
    chat_a, chat_b = await store.load_chat("a"), await store.load_chat("b")
    assert (chat_a.version, chat_a.active_turn_id, chat_a.last_provider_state) == (2, "a2", None)
    assert (chat_b.version, cursor_of(chat_b.last_provider_state)) == (1, "resp_b")
    assert [m.text() for m in await store.load_history("b")] == ["hello", "hi"]


async def test_history_excludes_in_progress_and_aborted(backend: Backend) -> None:
    """Committed history is completed messages only; the listing shows all with their status."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1")
    lease = await store.begin_turn("c1", start("t2"))
    await store.abort_turn(lease, abort("cancelled"))
    await committed_turn(store, "c1", "t3")
    await store.begin_turn("c1", start("t4"))
    assert [m.seq for m in await store.load_history("c1")] == [1, 2, 5, 6]
    statuses = [(m.seq, m.status) for m in await store.list_messages("c1")]
    done, gone, running = (MessageStatus.COMPLETED, MessageStatus.ABORTED,
                           MessageStatus.IN_PROGRESS)
    assert statuses == [(1, done), (2, done), (3, gone), (4, gone), (5, done), (6, done),
                        (7, running), (8, running)]


async def test_edit_clears_cursor_and_bumps_version(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """Editing a message replaces its parts, clears the cursor and bumps version, logged."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1", cursor="resp_1")
    backend.clock.advance(3)
    with caplog.at_level(logging.INFO, logger="turnstate"):
        await store.edit_message("c1", 1, (TextPart(text="rewritten"),))
    chat = await store.load_chat("c1")
    assert (chat.last_provider_state, chat.version) == (None, 2)
    user = (await store.load_history("c1"))[0]
    assert user.text() == "rewritten" and user.updated_at == chat.updated_at
    assert any("[continuation][clear]" in r.getMessage() and "history_edited" in r.getMessage()
               for r in caplog.records if r.name == "turnstate")


async def test_delete_clears_cursor_and_bumps_version(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """Deleting a message removes it, clears the cursor and bumps version; its turn stays."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1", cursor="resp_1")
    await committed_turn(store, "c1", "t2", cursor="resp_2")
    with caplog.at_level(logging.INFO, logger="turnstate"):
        await store.delete_message("c1", 2)
    chat = await store.load_chat("c1")
    assert (chat.last_provider_state, chat.version) == (None, 3)
    assert [m.seq for m in await store.list_messages("c1")] == [1, 3, 4]
    assert (await store.load_turn("t1")).assistant_seq == 2
    assert any("[continuation][clear]" in r.getMessage() and "history_deleted" in r.getMessage()
               for r in caplog.records if r.name == "turnstate")
    lease = await store.begin_turn("c1", start("t3"))
    assert lease.user_seq == 5


async def test_unknown_seq_raises_message_not_found_and_changes_nothing(
    backend: Backend,
) -> None:
    """Editing or deleting a missing seq raises MessageNotFound; the cursor survives."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    before = await committed_turn(store, "c1", "t1", cursor="resp_1")
    for call in (store.edit_message("c1", 9, ()), store.delete_message("c1", 0)):
        with pytest.raises(MessageNotFound) as caught:
            await call
        assert caught.value.chat_id == "c1" and isinstance(caught.value, LookupError)
    assert await store.load_chat("c1") == before


async def test_clear_provider_state_bumps_version_and_logs(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """An explicit clear sets the cursor NULL, bumps version and logs the reason."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1", cursor="resp_1")
    with caplog.at_level(logging.INFO, logger="turnstate"):
        await store.clear_provider_state("c1", reason="envelope_malformed")
    chat = await store.load_chat("c1")
    assert (chat.last_provider_state, chat.version) == (None, 2)
    assert [r.getMessage() for r in caplog.records if r.name == "turnstate"] == [
        "[continuation][clear] chat=c1 reason=envelope_malformed"]
    with pytest.raises(ChatNotFound):
        await store.clear_provider_state("missing", reason="x")


async def test_no_stored_row_ever_holds_loop_state(backend: Backend) -> None:
    """After durable, stateless, refused and aborted turns, no raw row holds loop state."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1", cursor="resp_1")
    lease = await store.begin_turn("c1", start("t2", provider="anthropic", model="claude"))
    stateless_audit = audit(None, provider="anthropic", model_name="claude",
                            strategy="local_loop", metadata={"iterations": 3})
    await store.commit_turn(lease, commit(None, audit=stateless_audit))
    lease = await store.begin_turn("c1", start("t3"))
    await store.abort_turn(lease, abort("provider_failed"))
    await committed_turn(store, "c1", "t4", cursor="resp_4")
    states = await backend.raw_states()
    assert len(states) == 4  # three audits (t1, t2, t4) and t4's cursor
    for text in states:
        assert "stateless-loop" not in text and "loopMessages" not in text
    chats = await backend.raw_rows("chats")
    assert [cursor_of(row["last_provider_state"]) for row in chats] == ["resp_4"]


async def test_stored_json_and_timestamps_are_canonical(backend: Backend) -> None:
    """JSON columns are compact camelCase text and timestamps fixed-width UTC ``Z`` text."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1", cursor="resp_1")
    (chat,) = await backend.raw_rows("chats")
    assert chat["created_at"] == "2026-01-31T12:00:00.000000Z"
    assert chat["last_context_state"].startswith('{"estimatedInputTokens":1200,"contextLimit"')
    user, assistant = await backend.raw_rows("messages")
    assert user["parts"] == '[{"text":"hello","type":"text"}]'
    assert assistant["usage"] == ('{"inputTokens":1200,"outputTokens":7,"cachedInputTokens":0,'
                                  '"reasoningTokens":0,"cacheHitTokens":null,'
                                  '"cacheMissTokens":null,"cacheWriteTokens":0}')
    assert assistant["provider_state"].startswith('{"provider":"openai","modelName":"gpt-4o"')
    (turn,) = await backend.raw_rows("turns")
    assert turn["path"].startswith('[{"source":"validate","trigger":"continue_with_cursor"')


async def test_reopening_a_file_database_loses_nothing(backend: Backend) -> None:
    """Closing and reopening a file database gives back every chat, message, turn and lease."""
    if backend.reopen_store is None:
        pytest.skip("only file databases outlive their store")
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1", cursor="resp_1", text="😀\x00")
    lease = await store.begin_turn("c1", start("t2"))
    before = (await store.load_chat("c1"), await store.list_messages("c1"),
              await store.list_turns("c1"))
    await backend.reopen()
    store = backend.store
    after = (await store.load_chat("c1"), await store.list_messages("c1"),
             await store.list_turns("c1"))
    assert after == before
    await store.commit_turn(lease, commit("resp_2"))
    assert (await store.load_turn("t2")).status == TurnStatus.COMPLETED
