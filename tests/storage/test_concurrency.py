"""Concurrent turns through one store: many chats at once, and one contended chat."""

from __future__ import annotations

import asyncio
import collections

import attrs

from tests.storage.support import TRANSITION, Backend, commit, cursor_of, start
from turnstate.core._conversation import MessageStatus, Role, TextPart
from turnstate.core._errors import ChatBusy


async def _store_turn(backend: Backend, chat_id: str, turn_id: str) -> None:
    store = backend.store
    lease = await store.begin_turn(chat_id, start(turn_id, f"q-{turn_id}"))
    await store.record_transition(lease, TRANSITION, clear_provider_state=False)
    await store.commit_turn(lease, commit(f"resp_{turn_id}",
                                          parts=(TRANSITION, TextPart(text=f"a-{turn_id}"))))


async def test_fifty_chats_commit_concurrently(backend: Backend) -> None:
    """50 concurrent begin → transition → commit turns on 50 chats all commit."""
    store = backend.store
    for index in range(50):
        await store.create_chat(owner="alice", chat_id=f"c{index}")
    await asyncio.gather(*(_store_turn(backend, f"c{i}", f"t{i}") for i in range(50)))
    for index in range(50):
        chat = await store.load_chat(f"c{index}")
        assert (chat.version, chat.active_turn_id) == (1, None)
        assert cursor_of(chat.last_provider_state) == f"resp_t{index}"
        user, assistant = await store.load_history(f"c{index}")
        assert user.text() == f"q-t{index}" and assistant.text() == f"a-t{index}"
        assert assistant.parts[0] == attrs.evolve(TRANSITION, recovered=True)


class _Contention:
    """Bookkeeping for turns racing for one chat (everything runs on one event loop).

    Refusals are counted per holding turn (``ChatBusy.active_turn_id``), not by when they
    arrive: over a connection pool, a rival's refusal can come back before the holder's
    own begin does.
    """

    def __init__(self, workers: int) -> None:
        self.changed = asyncio.Condition()
        self.remaining = workers
        self.ended: set[str] = set()
        self.refused_by: collections.Counter[str] = collections.Counter()
        self.running = 0
        self.most_running = 0

    @property
    def refusals(self) -> int:
        return sum(self.refused_by.values())


async def _contend(backend: Backend, state: _Contention, index: int) -> None:
    store = backend.store
    turn_id = f"t{index:02}"
    while True:
        try:
            lease = await store.begin_turn("c1", start(turn_id, f"q{index}"))
        except ChatBusy as caught:
            # Refused before anything was written: every stored message belongs to a turn
            # that began, two per turn.
            assert len(await store.list_messages("c1")) % 2 == 0
            holder = caught.active_turn_id
            async with state.changed:
                state.refused_by[holder] += 1
                state.changed.notify_all()
                await state.changed.wait_for(lambda holder=holder: holder in state.ended)
            continue
        state.running += 1
        state.most_running = max(state.most_running, state.running)
        async with state.changed:
            # Hold the lease until every other waiting turn has tried and been refused.
            await state.changed.wait_for(
                lambda: state.refused_by[turn_id] >= state.remaining - 1)
        await store.record_transition(lease, TRANSITION, clear_provider_state=False)
        await store.commit_turn(lease, commit(f"resp_{index}"))
        state.running -= 1
        async with state.changed:
            state.remaining -= 1
            state.ended.add(turn_id)
            state.changed.notify_all()
        return


async def test_twenty_turns_on_one_chat_run_one_at_a_time(backend: Backend) -> None:
    """20 concurrent turns on one chat: one holds it at a time, the others get ChatBusy."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    state = _Contention(20)
    await asyncio.wait_for(
        asyncio.gather(*(_contend(backend, state, i) for i in range(20))), timeout=30)
    assert state.most_running == 1
    assert state.refusals >= sum(range(20))  # each holder outlasted every waiting rival
    history = await store.load_history("c1")
    assert len(history) == 40 and [m.seq for m in history] == list(range(1, 41))
    assert all(m.status == MessageStatus.COMPLETED for m in history)
    for user, assistant in zip(history[0::2], history[1::2], strict=True):
        assert (user.role, assistant.role) == (Role.USER, Role.ASSISTANT)
        turn_id = user.id.removesuffix(":user")
        assert assistant.id == f"{turn_id}:assistant"
        assert user.text() == f"q{int(turn_id[1:])}"
    chat = await store.load_chat("c1")
    assert chat.version == 20 and chat.active_turn_id is None
    assert len({t.id for t in await store.list_turns("c1", limit=100)}) == 20
