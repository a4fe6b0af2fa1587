"""Conformance, part 4: the chat's history counters (``committed_seq``, ``history_chars``).

A cursor turn reads neither the history nor anything proportional to it, so every
backend keeps these two counters on the chat row in the same transaction as each
write; each test checks them against ``load_history`` (and the expected numbers).
"""

from __future__ import annotations

import attrs
import pytest

from tests.storage.support import (
    Backend,
    abort,
    assert_counters_match_history,
    commit,
    committed_turn,
    start,
)
from turnstate.core._conversation import (
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    TransitionPart,
)
from turnstate.core._errors import CommitConflict

TOOL_PARTS = (
    ReasoningPart(provider="openai", model="gpt-4o", kind="reasoning", text="think",
                  signature="sig-not-counted", data="data-not-counted"),
    ToolCallPart(call_id="call_1", name="weather", arguments='{"city":"Oslo"}'),
    ToolResultPart(call_id="call_1", name="weather", output="cold \x00 😀"),
    TransitionPart(reason="model_changed", strategy="replay", source_state="validate"),
    TextPart(text="It is cold."),
)
TOOL_PARTS_CHARS = 5 + 7 + 15 + 8 + 11


@pytest.mark.parametrize("carried", [True, False], ids=["begin's count", "counted at commit"])
async def test_the_commit_counts_the_user_message_either_way(backend: Backend,
                                                             carried: bool) -> None:
    """A lease that carries begin's count of the user's message (issue 26: the commit
    then reads nothing back) and one that does not commit the same counters."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1", text="nul \x00 and 😀"))
    if not carried:
        lease = attrs.evolve(lease, user_chars=None)
    elif lease.user_chars is not None:
        assert lease.user_chars == 11
    returned = await store.commit_turn(lease, commit("resp_1", parts=TOOL_PARTS))
    assert (returned.committed_seq, returned.history_chars) == (2, 11 + TOOL_PARTS_CHARS)
    assert await assert_counters_match_history(store, "c1") == returned


async def test_a_new_chat_counts_nothing(backend: Backend) -> None:
    """A chat without committed messages has no committed seq and no characters."""
    chat = await backend.store.create_chat(owner="alice", chat_id="c1")
    assert (chat.committed_seq, chat.history_chars) == (None, 0)
    await assert_counters_match_history(backend.store, "c1")


async def test_a_commit_counts_its_user_and_assistant_parts(backend: Backend) -> None:
    """A commit adds both messages' model-visible characters (NUL and astral ones too;
    not signatures, opaque data or transition parts) and sets the assistant's seq."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1", text="nul \x00 and 😀"))
    returned = await store.commit_turn(lease, commit("resp_1", parts=TOOL_PARTS))
    assert (returned.committed_seq, returned.history_chars) == (2, 11 + TOOL_PARTS_CHARS)
    assert await assert_counters_match_history(store, "c1") == returned
    await committed_turn(store, "c1", "t2", text="abc", reply="de")
    chat = await assert_counters_match_history(store, "c1")
    assert (chat.committed_seq, chat.history_chars) == (4, 11 + TOOL_PARTS_CHARS + 5)


async def test_running_and_aborted_turns_count_nothing(backend: Backend) -> None:
    """Begin, transition, abort and an expired lease's reclaim leave the counters alone."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1", text="abc", reply="de")
    lease = await store.begin_turn("c1", start("t2", text="not yet"))
    await store.record_transition(lease, TOOL_PARTS[3], clear_provider_state=True)
    assert (await assert_counters_match_history(store, "c1")).history_chars == 5
    await store.abort_turn(lease, abort("cancelled", parts=(TextPart(text="partial"),)))
    await store.begin_turn("c1", start("t3", text="crashed", lease_seconds=1))
    backend.clock.advance(5)
    assert await store.reclaim_expired() == 1
    chat = await assert_counters_match_history(store, "c1")
    assert (chat.committed_seq, chat.history_chars) == (2, 5)


async def test_an_edit_moves_a_committed_message_count(backend: Backend) -> None:
    """Editing a committed message replaces its count; editing an unfinished turn's user
    message (its lease run out: a live one refuses the edit) counts nothing, and that
    turn's commit then conflicts, writing nothing."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1", text="abc", reply="de")
    await store.edit_message("c1", 2, TOOL_PARTS)
    chat = await assert_counters_match_history(store, "c1")
    assert chat.history_chars == 3 + TOOL_PARTS_CHARS
    lease = await store.begin_turn("c1", start("t2", text="typo", lease_seconds=1))
    backend.clock.advance(1)
    await store.edit_message("c1", 3, (TextPart(text="fixed typo"),))
    assert (await assert_counters_match_history(store, "c1")).history_chars == chat.history_chars
    with pytest.raises(CommitConflict):
        await store.commit_turn(lease, commit(None, parts=(TextPart(text="ok"),)))
    await store.abort_turn(lease, abort("commit_conflict"))
    final = await assert_counters_match_history(store, "c1")
    assert (final.committed_seq, final.history_chars) == (2, chat.history_chars)


async def test_a_delete_removes_its_count_and_recomputes_the_seq(backend: Backend) -> None:
    """Deleting committed messages removes their counts (the last one moves the seq back
    to the newest committed message left); deleting an aborted one changes nothing."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1", text="abc", reply="de")
    lease = await store.begin_turn("c1", start("t2", text="gone"))
    await store.abort_turn(lease, abort("cancelled"))
    await committed_turn(store, "c1", "t3", text="fgh", reply="ijkl")
    await store.delete_message("c1", 3)  # aborted
    assert (await assert_counters_match_history(store, "c1")).history_chars == 12
    await store.delete_message("c1", 6)  # the newest committed message
    chat = await assert_counters_match_history(store, "c1")
    assert (chat.committed_seq, chat.history_chars) == (5, 8)
    for seq in (1, 2, 5):
        await store.delete_message("c1", seq)
    chat = await assert_counters_match_history(store, "c1")
    assert (chat.committed_seq, chat.history_chars) == (None, 0)
    lease = await store.begin_turn("c1", start("t4", text="again"))
    assert (await store.commit_turn(lease, commit(None))).committed_seq == lease.assistant_seq
    await assert_counters_match_history(store, "c1")


async def test_deleting_from_a_seq_on_removes_those_counts(backend: Backend) -> None:
    """``delete_messages_from`` removes the committed messages' counts from that seq on and
    moves the committed seq back to the newest one left."""
    store = backend.store
    if not hasattr(store, "delete_messages_from"):
        pytest.skip(f"{backend.name} has no delete_messages_from yet")
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1", text="abc", reply="de")
    await committed_turn(store, "c1", "t2", text="fgh", reply="ijkl")
    await committed_turn(store, "c1", "t3", text="m", reply="n")
    assert await store.delete_messages_from("c1", 4) == 3
    chat = await assert_counters_match_history(store, "c1")
    assert (chat.committed_seq, chat.history_chars) == (3, 8)
