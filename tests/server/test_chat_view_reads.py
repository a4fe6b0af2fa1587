"""The chat view reads a window of a long chat, not the chat (issue 25, defect 9).

The store is wrapped to count the messages and turn records each read returns: the view
of a 300-turn chat reads what the view of a 3-turn chat reads, paging back through it
returns every message once, and the context meter still follows a delete when the turn
that decides it lies behind many newer ones.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests.server.conftest import TOKENS
from tests.server.support import Api
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.server import SERVER_REGISTRY, ServerConfig, create_app, make_services
from turnstate.storage import MessageWindow, SqliteStore, Store, TurnAbort
from turnstate.testing._records import committed_turn, start


class ReadCountingStore:
    """A store that counts, per method, the messages and turn records its reads return."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.rows: Counter[str] = Counter()
        self.unbounded_turn_reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def list_messages(self, chat_id: str, **kwargs: Any) -> Any:
        found = await self.inner.list_messages(chat_id, **kwargs)
        self.rows["list_messages"] += len(found)
        return found

    async def load_history(self, chat_id: str, **kwargs: Any) -> Any:
        found = await self.inner.load_history(chat_id, **kwargs)
        self.rows["load_history"] += len(found)
        return found

    async def load_messages(self, chat_id: str, **kwargs: Any) -> MessageWindow:
        window = await self.inner.load_messages(chat_id, **kwargs)
        self.rows["load_messages"] += len(window.messages) + len(window.turns)
        return window

    async def load_messages_lean(self, chat_id: str, **kwargs: Any) -> Any:
        """The view's window reads, without the media bytes: counted as windows too."""
        window = await self.inner.load_messages_lean(chat_id, **kwargs)
        self.rows["load_messages"] += len(window.messages) + len(window.turns)
        return window

    async def list_messages_lean(self, chat_id: str, **kwargs: Any) -> Any:
        found = await self.inner.list_messages_lean(chat_id, **kwargs)
        self.rows["list_messages"] += len(found)
        return found

    async def list_turns(self, chat_id: str, **kwargs: Any) -> Any:
        found = await self.inner.list_turns(chat_id, **kwargs)
        self.rows["list_turns"] += len(found)
        self.unbounded_turn_reads += kwargs.get("limit", 20) is None
        return found

    def reset(self) -> None:
        self.rows.clear()
        self.unbounded_turn_reads = 0


@pytest.fixture
async def spied() -> AsyncIterator[tuple[Api, ReadCountingStore]]:
    config = ServerConfig(max_body_bytes=64 * 1024, max_text_chars=2_000)
    async with EmulatedProviders() as stack, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport, \
            SqliteStore.open(":memory:") as inner:
        store = ReadCountingStore(inner)
        engine = TurnEngine(store, stack.adapters, transport,  # type: ignore[arg-type]
                            registry=SERVER_REGISTRY)
        services = make_services(engine, TOKENS, config=config, emulators=stack)
        server = TestServer(create_app(services))
        await server.start_server(**config.runner_options())
        async with TestClient(server) as client:
            yield Api(client=client, services=services, stack=stack), store


async def long_chat(store: ReadCountingStore, chat_id: str, turns: int) -> None:
    await store.create_chat(owner="alice", chat_id=chat_id)
    for index in range(turns):
        await committed_turn(store.inner, chat_id, f"{chat_id}-t{index}", text=f"q{index}")


async def test_the_view_of_a_long_chat_reads_one_window(
    spied: tuple[Api, ReadCountingStore],
) -> None:
    api, store = spied
    await long_chat(store, "short", 3)
    await long_chat(store, "long", 300)
    reads = {}
    for chat in ("short", "long"):
        store.reset()
        view = await api.json("GET", f"/api/chats/{chat}?limit=10")
        reads[chat] = dict(store.rows)
        assert store.unbounded_turn_reads == 0
        assert view["title"] == "q0"
    # the window and its 5 turns, then the title: the 4 oldest messages and their 2 turns
    assert reads["long"]["load_messages"] == 10 + 5 + 4 + 2
    assert "list_messages" not in reads["long"] and "load_history" not in reads["long"]
    assert reads["long"]["list_turns"] == 20  # the meter's newest turns, not all 300
    view = await api.json("GET", "/api/chats/long?limit=10")
    assert (view["messageCount"], view["older"]) == (600, 591)
    assert [m["seq"] for m in view["messages"]] == list(range(591, 601))
    assert all(m["turn"]["id"] for m in view["messages"] if m["role"] == "assistant")


async def test_paging_back_returns_every_message_once(
    spied: tuple[Api, ReadCountingStore],
) -> None:
    api, store = spied
    await long_chat(store, "c", 40)
    seen: list[int] = []
    path = "/api/chats/c?limit=17"
    while True:
        view = await api.json("GET", path)
        seen = [m["seq"] for m in view["messages"]] + seen
        if view["older"] is None:
            break
        path = f"/api/chats/c?limit=17&before={view['older']}"
    assert seen == list(range(1, 81))
    listed = await api.json("GET", "/api/chats")
    assert (listed["chats"][0]["title"], listed["chats"][0]["messageCount"]) == ("q0", 80)


async def test_the_meter_reads_further_back_when_the_newest_turns_do_not_decide(
    spied: tuple[Api, ReadCountingStore],
) -> None:
    """The last completed turn's answer was deleted and 25 aborted turns followed: the
    meter estimates what remains instead of showing the deleted turn's snapshot."""
    api, store = spied
    await long_chat(store, "c", 2)
    await store.delete_messages_from("c", 3)
    for index in range(25):
        lease = await store.inner.begin_turn("c", start(f"aborted-{index}"))
        await store.inner.abort_turn(lease, TurnAbort(reason="cancelled"))
    store.reset()
    view = await api.json("GET", "/api/chats/c")
    assert view["context"]["source"] == "estimate"
    assert store.unbounded_turn_reads == 1
