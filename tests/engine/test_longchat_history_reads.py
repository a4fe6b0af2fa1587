"""A stateless chat's turns read the history committed since their last read, not the
whole chat again (``engine._histories``): counted in messages the store decodes, so a
chat of n turns reads O(n) messages instead of O(n^2). And the history each request
sends is the store's ``load_history`` whatever happened in between: edits, deletes, an
edit-and-regenerate, aborted turns, another engine's turns, a chat deleted and made
again under its id."""

from __future__ import annotations

import json
from typing import Any

import attrs

from tests.engine.support import Env, collect, make_turn
from turnstate.core import ImagePart, TextPart, Usage
from turnstate.core._replay_roles import alternating_history
from turnstate.emulators._base import items_from_messages
from turnstate.emulators._scripted import ScriptStep
from turnstate.engine._driver import TurnEngine
from turnstate.engine._histories import HistoryCache
from turnstate.storage import TurnCommit, TurnStart

PROVIDER, MODEL = "deepseek", "deepseek-chat"  # stateless: every turn replays the history


class Counted:
    """Counts the messages the store's history reads return."""

    def __init__(self, store: Any) -> None:
        self.messages = 0
        self.load_history, self.load_messages = store.load_history, store.load_messages

        async def load_history(chat_id: str, **kwargs: Any) -> Any:
            history = await self.load_history(chat_id, **kwargs)
            self.messages += len(history)
            return history

        async def load_messages(chat_id: str, **kwargs: Any) -> Any:
            window = await self.load_messages(chat_id, **kwargs)
            self.messages += len(window.messages)
            return window

        store.load_history, store.load_messages = load_history, load_messages


async def _turn_sends_the_stored_history(env: Env, engine: TurnEngine | None = None,
                                         **kwargs: Any) -> Any:
    """One turn; its request's history is the committed history as it stood before (as
    a replay lays it out: a deleted message's gap marked, ``core._replay_roles``)."""
    before = await env.store.load_history(env.chat_id)
    cut = kwargs.get("replace_from")  # the turn's begin deletes from there on
    before = alternating_history(tuple(m for m in before if cut is None or m.seq < cut))[0]
    expected = json.loads(json.dumps([attrs.asdict(item)
                                      for item in items_from_messages(before)]))
    if engine is not None:
        env.engine = engine
    outcome = await env.turn(f"question {len(before)}", provider=PROVIDER, model=MODEL,
                             tools=(), **kwargs)
    assert outcome.committed, outcome.final
    assert env.backend.requests[-1].body["history"] == expected
    return outcome


async def test_a_long_stateless_chat_reads_each_message_about_once(env: Env) -> None:
    counted = Counted(env.store)
    turns = 60
    for number in range(turns):
        outcome = await env.turn(f"question {number}", provider=PROVIDER, model=MODEL,
                                 tools=())
        assert outcome.committed
    history = await counted.load_history(env.chat_id)
    assert len(history) == 2 * turns
    assert len(env.backend.requests[-1].body["history"]) == 2 * turns - 2
    # Reading the whole history every turn decoded sum(2k) = 3,540 messages; now
    # each turn reads the previous turn's two (plus its own two in progress).
    assert counted.messages <= 4 * turns, counted.messages
    assert env.engine.histories.whole_reads == 1


async def test_the_history_sent_is_the_stored_one_whatever_changed(env: Env) -> None:
    store: Any = env.store
    for _ in range(3):
        await _turn_sends_the_stored_history(env)
    await store.edit_message(env.chat_id, 2, (TextPart(text="an edited answer"),))
    await _turn_sends_the_stored_history(env)
    await store.edit_message(env.chat_id, 2, (TextPart(text="AN EDITED ANSWER"),))  # as long
    await _turn_sends_the_stored_history(env)
    await store.delete_message(env.chat_id, 3)
    await _turn_sends_the_stored_history(env)
    await store.delete_messages_from(env.chat_id, 9)
    await _turn_sends_the_stored_history(env)
    await _turn_sends_the_stored_history(env, replace_from=5)  # edit and regenerate
    env.backend.push(PROVIDER, ScriptStep.fail(status=400, code="invalid_request"))
    aborted = await env.turn("refused", provider=PROVIDER, model=MODEL, tools=())
    assert not aborted.committed
    await _turn_sends_the_stored_history(env)
    other = TurnEngine(env.store, env.backend.adapters(), env.backend, clock=env.clock)
    mine = env.engine
    for _ in range(2):  # another engine (another process) takes two turns
        await _turn_sends_the_stored_history(env, other)
    await _turn_sends_the_stored_history(env, mine)
    await store.delete_chat(env.chat_id)
    await store.create_chat(owner="alice", chat_id=env.chat_id)  # the same id, anew
    for _ in range(2):
        await _turn_sends_the_stored_history(env)
    assert mine.histories.page_reads >= 3  # the cache did serve turns in between


async def test_the_cache_keeps_at_most_its_chats_and_characters(env: Env) -> None:
    cache = HistoryCache(size=2, chars=10_000)  # about 1,000 a chat (MESSAGE_BYTES)
    chats = [await env.store.create_chat(owner="alice") for _ in range(3)]
    for chat in chats:
        await collect(env.engine.run_turn(chat.id, make_turn(
            "x" * 30, provider=PROVIDER, model=MODEL, tools=())))
    records = [await env.store.load_chat(chat.id) for chat in chats]
    for record in records:
        assert await cache.load(env.store, record) == await env.store.load_history(record.id)
    assert list(cache.entries) == [records[1].id, records[2].id]  # the oldest went
    assert cache.held == sum(cache.entries[r.id].size for r in records[1:]) <= 10_000
    big = HistoryCache(chars=10)
    await big.load(env.store, records[0])
    assert big.entries == {} and big.held == 0  # a history above the budget is not kept


async def test_inline_media_bytes_count_against_the_bound(env: Env) -> None:
    """A chat of photos holds megabytes its counted characters (a token estimate per
    image) do not show: its bytes count too, so it is not kept past the bound (before,
    64 such chats could hold every photo they had)."""
    chat = await env.store.create_chat(owner="alice")
    photo = ImagePart(data=b"\x89PNG\r\n\x1a\n" + bytes(300_000), media_type="image/png")
    lease = await env.store.begin_turn(chat.id, TurnStart(
        turn_id="t-photo", user_parts=(TextPart(text="look"), photo),
        provider=PROVIDER, model=MODEL))
    await env.store.commit_turn(lease, TurnCommit(
        parts=(TextPart(text="a photo"),), provider_state=None, audit=None,
        usage=Usage(input_tokens=1, output_tokens=1), context=None, strategy="replay",
        path=()))
    record = await env.store.load_chat(chat.id)
    assert record.history_chars < 100_000  # the image counts as its token estimate
    cache = HistoryCache(chars=200_000)
    assert await cache.load(env.store, record) == await env.store.load_history(chat.id)
    assert cache.entries == {} and cache.held == 0
    roomy = HistoryCache(chars=1_000_000)
    await roomy.load(env.store, record)
    assert roomy.held == roomy.entries[chat.id].size >= 300_000
