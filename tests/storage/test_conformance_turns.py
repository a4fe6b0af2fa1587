"""Conformance, part 1: chats and the turn's three writes, on every backend."""

from __future__ import annotations

import json
import logging

import pytest

from tests.storage.support import (
    PATH,
    SNAPSHOT,
    T0,
    TRANSITION,
    Backend,
    abort,
    audit,
    commit,
    committed_turn,
    cursor_of,
    envelope,
    loop_state,
    start,
)
from turnstate.core._conversation import (
    MessageStatus,
    OpaquePart,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    TransitionPart,
    Usage,
)
from turnstate.core._errors import (
    ChatNotFound,
    CommitConflict,
    ConfigurationError,
    PersistenceRefused,
    StorageError,
    TurnNotFound,
)
from turnstate.storage import TurnStatus, decode_audit, decode_context


async def test_create_and_load_chat(backend: Backend) -> None:
    """A new chat has version 0, no cursor, no lease and the clock's timestamps."""
    created = await backend.store.create_chat(owner="alice", chat_id="c1")
    assert created == await backend.store.load_chat("c1")
    assert (created.id, created.owner, created.version) == ("c1", "alice", 0)
    assert created.created_at == created.updated_at == T0
    assert created.last_provider_state is None and created.active_turn_id is None


async def test_create_chat_generates_distinct_ids(backend: Backend) -> None:
    """Without an id, each chat gets a fresh one."""
    first = await backend.store.create_chat(owner="alice")
    second = await backend.store.create_chat(owner="alice")
    assert first.id != second.id


async def test_duplicate_chat_id_is_refused(backend: Backend) -> None:
    """Creating a chat with an existing id raises StorageError and keeps the first chat."""
    await backend.store.create_chat(owner="alice", chat_id="c1")
    with pytest.raises(StorageError, match="already exists"):
        await backend.store.create_chat(owner="bob", chat_id="c1")
    assert (await backend.store.load_chat("c1")).owner == "alice"


async def test_unknown_chat_raises_chat_not_found(backend: Backend) -> None:
    """Every chat-addressed method raises ChatNotFound for an unknown id."""
    store = backend.store
    calls = [store.load_chat("nope"), store.load_history("nope"), store.list_messages("nope"),
             store.list_turns("nope"), store.begin_turn("nope", start("t1")),
             store.clear_provider_state("nope", reason="x"),
             store.edit_message("nope", 1, ()), store.delete_message("nope", 1)]
    for call in calls:
        with pytest.raises(ChatNotFound) as caught:
            await call
        assert caught.value.chat_id == "nope"


async def test_list_chats_by_owner_most_recently_updated_first(backend: Backend) -> None:
    """``list_chats`` returns only the owner's chats, the most recently updated first."""
    store = backend.store
    for chat_id in ("a", "b", "c"):
        await store.create_chat(owner="alice", chat_id=chat_id)
        backend.clock.advance(1)
    await store.create_chat(owner="bob", chat_id="d")
    backend.clock.advance(1)
    await committed_turn(store, "a", "t1")
    assert [c.id for c in await store.list_chats("alice")] == ["a", "c", "b"]
    assert [c.id for c in await store.list_chats("bob")] == ["d"]
    assert await store.list_chats("carol") == ()


async def test_begin_turn_writes_messages_turn_and_lease(backend: Backend) -> None:
    """Begin inserts the user and an empty assistant message in progress and leases the chat."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1", "hello", lease_seconds=30))
    assert (lease.user_seq, lease.assistant_seq, lease.base_version) == (1, 2, 0)
    assert lease.expires_at == T0.replace(second=30)
    user, assistant = await store.list_messages("c1")
    assert (user.role, user.status, user.text()) == (Role.USER, MessageStatus.IN_PROGRESS,
                                                     "hello")
    assert (assistant.role, assistant.status, assistant.parts) == (
        Role.ASSISTANT, MessageStatus.IN_PROGRESS, ())
    assert (user.id, assistant.id) == (lease.user_message_id, lease.assistant_message_id)
    chat = await store.load_chat("c1")
    assert (chat.active_turn_id, chat.active_turn_expires_at) == ("t1", lease.expires_at)
    assert chat.version == 0
    turn = await store.load_turn("t1")
    assert (turn.status, turn.provider, turn.model, turn.user_seq, turn.assistant_seq) == (
        TurnStatus.IN_PROGRESS, "openai", "gpt-4o", 1, 2)
    assert await store.load_history("c1") == ()


async def test_begin_hands_over_the_chat_it_leased(backend: Backend) -> None:
    """Every store returns the chat, lease taken, on the lease (issue 26: the engine
    then reads nothing before a cursor turn's request; PostgreSQL in the same round trip
    as the take, schema version 7); it is what ``load_chat`` reads right after."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1")
    lease = await store.begin_turn("c1", start("t2", "again"))
    loaded = await store.load_chat("c1")
    assert lease.chat == loaded
    assert loaded.active_turn_id == "t2" and loaded.committed_seq == 2


async def test_a_begin_that_reclaims_hands_over_the_chat_it_leased(backend: Backend) -> None:
    """The chat on a lease that reclaimed an expired one (and after a cleared cursor) is
    what ``load_chat`` reads right after: SQLite builds it from its read and its writes
    instead of reading it back (issue 26, fifth pass)."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1", cursor="resp_1")
    await store.clear_provider_state("c1", reason="history_edited")
    await store.begin_turn("c1", start("t2", lease_seconds=5))
    backend.clock.advance(6)
    lease = await store.begin_turn("c1", start("t3", lease_seconds=30))  # reclaims t2
    loaded = await store.load_chat("c1")
    assert lease.chat == loaded and lease.expires_at == loaded.active_turn_expires_at
    assert (loaded.active_turn_id, loaded.version, lease.epoch) == ("t3", 2, 3)


async def test_commit_writes_everything_in_one_step(backend: Backend) -> None:
    """Commit writes parts, audit, usage, cursor, context, statuses, the turn, and bumps version."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    backend.clock.advance(5)
    chat = await store.commit_turn(lease, commit("resp_9", parts=(TextPart(text="answer"),)))
    assert chat == await store.load_chat("c1")
    assert (chat.version, chat.active_turn_id, chat.active_turn_expires_at) == (1, None, None)
    assert cursor_of(chat.last_provider_state) == "resp_9"
    assert chat.updated_at == T0.replace(second=5)
    assert chat.last_context_state is not None
    assert json.loads(chat.last_context_state) == {
        "estimatedInputTokens": 1200, "contextLimit": 128000,
        "estimatedUsageRatio": 1200 / 128000, "severity": "normal", "source": "provider"}
    assert decode_context(chat.last_context_state) == SNAPSHOT
    user, assistant = await store.load_history("c1")
    assert user.status == assistant.status == MessageStatus.COMPLETED
    assert assistant.text() == "answer"
    assert assistant.usage == Usage(input_tokens=1200, output_tokens=7)
    assert assistant.provider_state is not None
    assert decode_audit(assistant.provider_state) == audit("resp_9")
    turn = await store.load_turn("t1")
    assert (turn.status, turn.strategy, turn.path) == (TurnStatus.COMPLETED, "cursor", PATH)
    assert turn.ended_at == T0.replace(second=5)


async def test_commit_applies_decide_turn_persistence(backend: Backend) -> None:
    """A durable state without a usable cursor, or no state, commits a NULL cursor."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1", cursor="resp_1")
    lease = await store.begin_turn("c1", start("t2"))
    chat = await store.commit_turn(lease, commit("resp_2", provider_state=envelope("  ")))
    assert chat.last_provider_state is None
    await committed_turn(store, "c1", "t3", cursor="resp_3")
    chat = await committed_turn(store, "c1", "t4", cursor=None)
    assert chat.last_provider_state is None and chat.version == 4


async def test_commit_strips_nothing_it_was_not_given(backend: Backend) -> None:
    """The stored cursor is exactly ``serialize_envelope`` of the committed envelope."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    rich = envelope("resp_1", created_at=T0, covers_seq=2, metadata={"cacheHits": 3, "é": "😀"})
    lease = await store.begin_turn("c1", start("t1"))
    chat = await store.commit_turn(lease, commit("resp_1", provider_state=rich))
    assert json.loads(chat.last_provider_state or "") == {
        "schemaVersion": 1, "provider": "openai", "mode": "responses", "modelName": "gpt-4o",
        "systemPromptHash": "sys", "toolsetHash": "tools", "cursor": "resp_1",
        "createdAt": "2026-01-31T12:00:00Z", "coversSeq": 2,
        "metadata": {"cacheHits": 3, "é": "😀"}}


async def test_commit_refuses_stateless_loop_states(backend: Backend) -> None:
    """A stateless-loop state, loop messages, or loop markers in the audit are refused whole."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    durable_with_loop = envelope("resp_1", loop_messages=({"role": "tool"},))
    refused = [commit("resp_1", provider_state=loop_state()),
               commit("resp_1", provider_state=durable_with_loop),
               commit("resp_1", audit=audit(metadata={"loopMessages": []})),
               commit("resp_1", audit=audit(metadata={"mode": "stateless-loop"}))]
    for record in refused:
        with pytest.raises(PersistenceRefused):
            await store.commit_turn(lease, record)
    chat = await store.load_chat("c1")
    assert (chat.version, chat.active_turn_id, chat.last_provider_state) == (0, "t1", None)
    assert {m.status for m in await store.list_messages("c1")} == {MessageStatus.IN_PROGRESS}
    assert not any("stateless-loop" in s or "loopMessages" in s
                   for s in await backend.raw_states())
    await store.commit_turn(lease, commit(None, audit=audit(None, strategy="local_loop")))
    assert (await store.load_chat("c1")).version == 1


async def test_commit_flips_transition_parts_to_recovered(backend: Backend) -> None:
    """The transition part is stored with recovered false during the turn, true after commit."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    await store.record_transition(lease, TRANSITION, clear_provider_state=False)
    in_flight = (await store.list_messages("c1"))[1]
    assert in_flight.parts == (TRANSITION,) and not TRANSITION.recovered
    other = TransitionPart(reason="cursor_expired", strategy="replay", source_state="cursor")
    await store.commit_turn(lease, commit("resp_1", parts=(TRANSITION, TextPart(text="ok"),
                                                           other)))
    parts = (await store.load_history("c1"))[1].parts
    assert [p.recovered for p in parts if isinstance(p, TransitionPart)] == [True, True]
    assert parts[1] == TextPart(text="ok")


async def test_record_transition_clears_cursor_without_bumping_version(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """A clearing transition sets the cursor NULL, logs the clear, and the commit still works."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1", cursor="resp_1")
    lease = await store.begin_turn("c1", start("t2"))
    with caplog.at_level(logging.INFO, logger="turnstate"):
        await store.record_transition(lease, TRANSITION, clear_provider_state=True)
    chat = await store.load_chat("c1")
    assert (chat.last_provider_state, chat.version) == (None, 1)
    assert any(r.name == "turnstate" and r.levelno == logging.INFO
               and "[continuation][clear]" in r.getMessage() and "c1" in r.getMessage()
               and "model_changed" in r.getMessage() for r in caplog.records)
    assert (await store.commit_turn(lease, commit("resp_2"))).version == 2


async def test_record_transition_without_clear_keeps_cursor(backend: Backend) -> None:
    """A transition recorded without clearing leaves the chat row alone."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1", cursor="resp_1")
    before = await store.load_chat("c1")
    lease = await store.begin_turn("c1", start("t2"))
    await store.record_transition(lease, TRANSITION, clear_provider_state=False)
    assert (await store.load_chat("c1")).last_provider_state == before.last_provider_state


async def test_abort_keeps_previous_cursor_and_version(backend: Backend) -> None:
    """An abort marks both messages aborted, records why, releases the lease, keeps the cursor."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    before = await committed_turn(store, "c1", "t1", cursor="resp_1")
    lease = await store.begin_turn("c1", start("t2", "again"))
    produced = (ReasoningPart(provider="openai", model="gpt-4o", kind="reasoning", text="hm"),)
    await store.abort_turn(lease, abort("provider_failed", parts=produced, strategy="cursor",
                                        path=PATH[:1], detail="HTTP 500"))
    chat = await store.load_chat("c1")
    assert (chat.last_provider_state, chat.version) == (before.last_provider_state, 1)
    assert chat.active_turn_id is None
    assert [m.seq for m in await store.load_history("c1")] == [1, 2]
    listed = await store.list_messages("c1")
    assert [(m.seq, m.status) for m in listed[2:]] == [(3, MessageStatus.ABORTED),
                                                       (4, MessageStatus.ABORTED)]
    assert listed[3].parts == produced
    turn = await store.load_turn("t2")
    assert (turn.status, turn.reason, turn.detail, turn.strategy, turn.path) == (
        TurnStatus.ABORTED, "provider_failed", "HTTP 500", "cursor", PATH[:1])


async def test_abort_without_parts_keeps_recorded_transition(backend: Backend) -> None:
    """An abort with no parts keeps what the turn already stored (its transition part)."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    await store.record_transition(lease, TRANSITION, clear_provider_state=False)
    await store.abort_turn(lease, abort("cancelled"))
    assistant = (await store.list_messages("c1"))[1]
    assert (assistant.status, assistant.parts) == (MessageStatus.ABORTED, (TRANSITION,))


async def test_commit_after_abort_conflicts(backend: Backend) -> None:
    """A turn that aborted cannot commit afterwards: its lease is gone."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    await store.abort_turn(lease, abort("cancelled"))
    with pytest.raises(CommitConflict):
        await store.commit_turn(lease, commit("resp_1"))
    assert (await store.load_chat("c1")).last_provider_state is None
    assert await store.load_history("c1") == ()


async def test_abort_after_commit_changes_nothing(backend: Backend) -> None:
    """Aborting a turn that already committed (a late cleanup) leaves the commit intact."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    chat = await store.commit_turn(lease, commit("resp_1"))
    await store.abort_turn(lease, abort("cancelled"))
    assert await store.load_chat("c1") == chat
    assert (await store.load_turn("t1")).status == TurnStatus.COMPLETED
    assert len(await store.load_history("c1")) == 2


async def test_every_part_kind_round_trips(backend: Backend) -> None:
    """Each part kind comes back equal, optional fields None or set."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    parts = (ReasoningPart(provider="anthropic", model="claude", kind="thinking", text="",
                           signature="sig==", data=None),
             ReasoningPart(provider="openai", model="o3", kind="reasoning", data="enc"),
             ToolCallPart(call_id="call_1", name="search", arguments='{"q": "x"}',
                          provider="gemini", model="g", signature="s"),
             ToolCallPart(call_id="call_2", name="noop", arguments=""),
             ToolResultPart(call_id="call_1", name="search", output="", is_error=True),
             TransitionPart(reason="cursor_invalid", strategy="replay", source_state="cursor",
                            recovered=True),
             TextPart(text=""),
             TextPart(text="Checking.", phase="commentary"),
             OpaquePart(provider="openai", model="gpt-5", kind="web_search_call",
                        raw='{"type":"web_search_call","id":"ws_1","status":"completed"}'))
    lease = await store.begin_turn("c1", start("t1"))
    await store.commit_turn(lease, commit("resp_1", parts=parts, usage=Usage(
        cache_hit_tokens=5, cache_miss_tokens=None)))
    assistant = (await store.load_history("c1"))[1]
    assert assistant.parts == parts
    assert assistant.usage == Usage(cache_hit_tokens=5)


async def test_none_fields_round_trip(backend: Backend) -> None:
    """A commit without audit and context stores NULLs and reads them back as None."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    chat = await store.commit_turn(lease, commit(None, audit=None, context=None, path=()))
    assert (chat.last_provider_state, chat.last_context_state) == (None, None)
    user, assistant = await store.load_history("c1")
    assert (user.provider_state, user.usage, assistant.provider_state) == (None, None, None)
    assert (await store.load_turn("t1")).path == ()


async def test_turn_records_newest_first(backend: Backend) -> None:
    """``list_turns`` is newest first and honours the limit; unknown turns raise."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    for index in range(5):
        await committed_turn(store, "c1", f"t{index}", cursor=f"resp_{index}")
    lease = await store.begin_turn("c1", start("t5"))
    await store.abort_turn(lease, abort("cancelled"))
    turns = await store.list_turns("c1", limit=3)
    assert [t.id for t in turns] == ["t5", "t4", "t3"]
    assert [t.status for t in turns] == [TurnStatus.ABORTED, TurnStatus.COMPLETED,
                                         TurnStatus.COMPLETED]
    assert len(await store.list_turns("c1")) == 6
    assert await store.list_turns("c1", limit=0) == ()
    with pytest.raises(ConfigurationError):
        await store.list_turns("c1", limit=-1)
    with pytest.raises(TurnNotFound) as caught:
        await store.load_turn("missing")
    assert isinstance(caught.value, LookupError) and caught.value.turn_id == "missing"


async def test_duplicate_turn_id_is_refused_before_writing(backend: Backend) -> None:
    """Reusing a turn id raises StorageError and writes nothing."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1")
    with pytest.raises(StorageError, match="already recorded"):
        await store.begin_turn("c1", start("t1"))
    chat = await store.load_chat("c1")
    assert chat.active_turn_id is None and len(await store.list_messages("c1")) == 2


@pytest.mark.parametrize("seconds", [0, -1, float("inf"), float("nan"), 1e30])
async def test_bad_lease_seconds_are_refused(backend: Backend, seconds: float) -> None:
    """A lease that is not a positive, finite, representable span is a ConfigurationError."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    with pytest.raises(ConfigurationError):
        await store.begin_turn("c1", start("t1", lease_seconds=seconds))
    assert await store.list_messages("c1") == ()
