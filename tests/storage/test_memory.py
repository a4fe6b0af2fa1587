"""MemoryStore specifics: what a turn's writes cost in Python calls."""

from __future__ import annotations

import sys
from typing import Any

from tests.storage.support import commit, start
from turnstate.storage import MemoryStore, _memory, _memory_rows, _memory_turns

# the store's own code: the module and the two its class builds on
_STORE_FILES = frozenset(m.__file__ for m in (_memory, _memory_rows, _memory_turns))


async def test_a_turns_begin_and_commit_make_few_calls_into_the_store() -> None:
    """A cursor turn's ``begin_turn`` and ``commit_turn`` run the store's own code in at
    most 8 Python calls (issue 26): a row's values are read by one ``itemgetter``, not a
    generator resumed once per column (34 calls before)."""
    store = MemoryStore()
    chat = await store.create_chat(owner="o")
    lease = await store.begin_turn(chat.id, start("t0"))
    await store.commit_turn(lease, commit("resp_0"))
    calls: list[str] = []

    def watch(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename in _STORE_FILES:
            calls.append(frame.f_code.co_name)

    sys.setprofile(watch)
    try:
        lease = await store.begin_turn(chat.id, start("t1"))
        await store.commit_turn(lease, commit("resp_1"))
    finally:
        sys.setprofile(None)
    assert len(calls) <= 8, calls
