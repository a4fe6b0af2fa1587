"""Conformance, part 4: ownership, paginated listings, deleting chats and message tails."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.storage.support import Backend, abort, committed_turn, cursor_of, start
from turnstate.core._conversation import TextPart
from turnstate.core._errors import (
    ChatBusy,
    ChatNotFound,
    ConfigurationError,
    MessageNotFound,
)
from turnstate.storage import ChatPosition, Store

Call = Callable[[Store, str | None], Awaitable[Any]]

# Every method that addresses a chat by id, called with the given owner.
OWNED_CALLS: dict[str, Call] = {
    "load_chat": lambda s, o: s.load_chat("c1", owner=o),
    "load_history": lambda s, o: s.load_history("c1", owner=o),
    "list_messages": lambda s, o: s.list_messages("c1", owner=o),
    "list_turns": lambda s, o: s.list_turns("c1", owner=o),
    "begin_turn": lambda s, o: s.begin_turn("c1", start("t9"), owner=o),
    "clear_provider_state": lambda s, o: s.clear_provider_state("c1", reason="x", owner=o),
    "edit_message": lambda s, o: s.edit_message("c1", 1, (TextPart(text="e"),), owner=o),
    "delete_message": lambda s, o: s.delete_message("c1", 1, owner=o),
    "delete_messages_from": lambda s, o: s.delete_messages_from("c1", 1, owner=o),
    "delete_chat": lambda s, o: s.delete_chat("c1", owner=o),
}


async def _snapshot(backend: Backend) -> dict[str, list[dict[str, Any]]]:
    return {table: await backend.raw_rows(table) for table in ("chats", "messages", "turns")}


@pytest.mark.parametrize("method", list(OWNED_CALLS))
async def test_another_owner_is_told_not_found_and_nothing_changes(
        backend: Backend, method: str) -> None:
    """Another owner gets the very ChatNotFound a missing chat gives, and no row moves."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1", cursor="resp_1")
    before = await _snapshot(backend)
    with pytest.raises(ChatNotFound) as foreign:
        await OWNED_CALLS[method](store, "mallory")
    assert await _snapshot(backend) == before
    await store.create_chat(owner="alice", chat_id="other")
    with pytest.raises(ChatNotFound) as missing:
        await OWNED_CALLS[method](_Renamed(store, "c1", "nope"), None)
    assert str(foreign.value) == str(missing.value).replace("nope", "c1")
    assert foreign.value.chat_id == "c1"
    await OWNED_CALLS[method](store, "alice")  # the owner itself is let through


class _Renamed:
    """A store whose calls for chat ``old`` go to chat ``new`` (a missing one)."""

    def __init__(self, store: Store, old: str, new: str) -> None:
        self.store, self.old, self.new = store, old, new

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)

        def call(chat_id: str, *args: Any, **kwargs: Any) -> Any:
            return method(self.new if chat_id == self.old else chat_id, *args, **kwargs)

        return call


async def test_owner_none_skips_the_check(backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    assert lease.chat_id == "c1"
    assert (await store.load_chat("c1")).owner == "alice"


async def test_list_chats_pages_newest_first(backend: Backend) -> None:
    """Pages of ``limit`` chats, each continuing after the last one's position."""
    store = backend.store
    for index in range(7):
        await store.create_chat(owner="alice", chat_id=f"c{index}")
        backend.clock.advance(1)
    await store.create_chat(owner="bob", chat_id="b0")
    await committed_turn(store, "c2", "t1")  # now the most recently updated
    everything = [c.id for c in await store.list_chats("alice")]
    assert everything == ["c2", "c6", "c5", "c4", "c3", "c1", "c0"]
    pages: list[list[str]] = []
    after: ChatPosition | None = None
    while True:
        page = await store.list_chats("alice", limit=3, after=after)
        if not page:
            break
        pages.append([c.id for c in page])
        after = ChatPosition.of(page[-1])
    assert pages == [["c2", "c6", "c5"], ["c4", "c3", "c1"], ["c0"]]
    assert await store.list_chats("alice", limit=0) == ()
    with pytest.raises(ConfigurationError):
        await store.list_chats("alice", limit=-1)


async def test_list_chats_breaks_timestamp_ties_by_id(backend: Backend) -> None:
    store = backend.store
    for name in ("a", "c", "b"):
        await store.create_chat(owner="alice", chat_id=name)  # one instant: the clock is still
    first = await store.list_chats("alice", limit=2)
    rest = await store.list_chats("alice", after=ChatPosition.of(first[-1]))
    assert [c.id for c in first + rest] == ["c", "b", "a"]


async def test_list_turns_without_limit_lists_every_turn(backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    for index in range(25):
        await committed_turn(store, "c1", f"t{index:02}")
    assert len(await store.list_turns("c1")) == 20
    turns = await store.list_turns("c1", limit=None)
    assert [t.id for t in turns] == [f"t{index:02}" for index in reversed(range(25))]


async def test_delete_messages_from_cuts_the_tail_and_clears_the_cursor(
        backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    for index in range(3):
        chat = await committed_turn(store, "c1", f"t{index}", cursor=f"resp_{index}")
    assert cursor_of(chat.last_provider_state) == "resp_2"
    assert await store.delete_messages_from("c1", 3, owner="alice") == 4
    after = await store.load_chat("c1")
    assert after.last_provider_state is None and after.version == chat.version + 1
    assert [m.seq for m in await store.list_messages("c1")] == [1, 2]
    turns = {t.id: t for t in await store.list_turns("c1")}
    assert set(turns) == {"t0", "t1", "t2"}  # the audit stays
    rows = {r["id"]: r for r in await backend.raw_rows("turns")}
    assert rows["t1"]["user_message_id"] is None and rows["t0"]["user_message_id"] is not None
    # Each turn names its answer by message id; a deleted answer's turn names none, so
    # the reused seq 4 of the next turn is never mistaken for t1's.
    answers = {m.seq: m.id for m in await store.list_messages("c1")}
    assert turns["t0"].assistant_message_id == answers[2]
    assert turns["t1"].assistant_message_id is None is turns["t2"].assistant_message_id
    # The next turn continues after the cut.
    lease = await store.begin_turn("c1", start("t3"))
    assert lease.user_seq == 3


async def test_delete_messages_from_refuses_missing_seq_and_live_lease(
        backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1")
    before = await _snapshot(backend)
    with pytest.raises(MessageNotFound):
        await store.delete_messages_from("c1", 7)
    lease = await store.begin_turn("c1", start("t2"))
    running = await _snapshot(backend)
    with pytest.raises(ChatBusy):
        await store.delete_messages_from("c1", 1)
    assert await _snapshot(backend) == running != before
    backend.clock.advance(10_000)  # an expired lease does not protect the chat
    await store.abort_turn(lease, abort())
    assert await store.delete_messages_from("c1", 1) == 4


async def test_delete_messages_from_checks_owner_then_lease_then_message(
        backend: Backend) -> None:
    """Where several refusals apply, every backend gives the same one: a foreign owner
    is told ChatNotFound, then a live lease gives ChatBusy, and only then does a missing
    seq give MessageNotFound. Nothing changes in any case."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1")
    lease = await store.begin_turn("c1", start("t2"))
    running = await _snapshot(backend)
    with pytest.raises(ChatNotFound):
        await store.delete_messages_from("c1", 99, owner="mallory")
    with pytest.raises(ChatBusy):
        await store.delete_messages_from("c1", 99, owner="alice")
    with pytest.raises(ChatBusy):
        await store.delete_messages_from("c1", 99)
    assert await _snapshot(backend) == running
    backend.clock.advance(10_000)  # the lease expires: now the missing seq is what applies
    with pytest.raises(MessageNotFound):
        await store.delete_messages_from("c1", 99, owner="alice")
    await store.abort_turn(lease, abort())
    with pytest.raises(MessageNotFound):
        await store.delete_messages_from("c1", 99)


async def test_delete_chat_removes_everything_of_that_chat_only(backend: Backend) -> None:
    store = backend.store
    for chat_id in ("c1", "c2"):
        await store.create_chat(owner="alice", chat_id=chat_id)
        await committed_turn(store, chat_id, f"{chat_id}-t1")
    await store.delete_chat("c1", owner="alice")
    with pytest.raises(ChatNotFound):
        await store.load_chat("c1")
    assert [c.id for c in await store.list_chats("alice")] == ["c2"]
    for table in ("messages", "turns"):
        assert {r["chat_id"] for r in await backend.raw_rows(table)} == {"c2"}
    with pytest.raises(ChatNotFound):
        await store.delete_chat("c1")
    await store.create_chat(owner="alice", chat_id="c1")  # the id is free again
    assert await store.list_messages("c1") == ()


async def test_delete_chat_refuses_a_running_turn(backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    with pytest.raises(ChatBusy):
        await store.delete_chat("c1", owner="alice")
    await store.abort_turn(lease, abort())
    await store.delete_chat("c1", owner="alice")
    assert await store.list_chats("alice") == ()
