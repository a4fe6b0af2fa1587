"""The history cache's bound is about the memory its entries hold: a chat of many short
messages holds several times its counted characters (each ``Message``, its parts and
their strings), which the bound now counts (``MESSAGE_BYTES``)."""

from __future__ import annotations

import gc
import tracemalloc

from turnstate.core import TextPart, Usage
from turnstate.engine._histories import HistoryCache
from turnstate.storage import MemoryStore, TurnCommit, TurnStart


async def test_a_chat_of_short_messages_counts_what_it_holds() -> None:
    store = MemoryStore()
    chat = await store.create_chat(owner="alice")
    for number in range(150):
        lease = await store.begin_turn(chat.id, TurnStart(
            turn_id=f"t{number}", user_parts=(TextPart(text=f"question {number}"),),
            provider="deepseek", model="deepseek-chat"))
        await store.commit_turn(lease, TurnCommit(
            parts=(TextPart(text=f"answer {number}"),), provider_state=None, audit=None,
            usage=Usage(input_tokens=1, output_tokens=1), context=None, strategy="replay",
            path=()))
    record = await store.load_chat(chat.id)
    cache = HistoryCache()
    gc.collect()
    tracemalloc.start()
    try:
        history = await cache.load(store, record)
        del history
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # Before, the entry counted its 3,000-odd characters for about 100 KB held.
    assert held / 2 <= cache.held <= held * 2, (held, cache.held)
