"""A turn that starts while the server shuts down (helper "lifecycle").

``DetachedTurns.close`` (the server's shutdown) ended the turns running here when it
began; a ``POST .../turns`` whose begin was in flight at that moment was not among them:
its turn took the chat after the shutdown had counted its turns, ran on after the
server's cleanup had returned, and in a ``serve`` process then lost its store (closed
next) with the chat held until the lease ran out and its stream cut. Now a start in
flight is waited for and ended ``cancelled`` like the others, and a turn asked for once
the shutdown began is refused before its begin (503 ``shutting_down``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests.server.support import parse_sse, turn_body
from turnstate.emulators._base import Fault
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.server import SERVER_REGISTRY, ServerConfig, create_app, make_services
from turnstate.server._http import ApiError
from turnstate.server._services import Services
from turnstate.storage import MemoryStore, TurnStatus

WAIT = 20.0
AUTH = {"Authorization": "Bearer alice-token"}


class GatedBegin(MemoryStore):
    """A store whose ``begin_turn`` waits for ``go`` once ``gate`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = False
        self.entered = asyncio.Event()
        self.go = asyncio.Event()

    async def begin_turn(self, *args: Any, **kwargs: Any) -> Any:
        if self.gate:
            self.entered.set()
            await self.go.wait()
        return await super().begin_turn(*args, **kwargs)


@attrs.define
class Node:
    store: GatedBegin
    services: Services
    server: TestServer
    client: TestClient  # type: ignore[type-arg]
    stack: EmulatedProviders


@pytest.fixture
async def node() -> AsyncIterator[Node]:
    async with EmulatedProviders() as stack, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport:
        store = GatedBegin()
        engine = TurnEngine(store, stack.adapters, transport, registry=SERVER_REGISTRY)
        services = make_services(engine, {"alice-token": "alice"}, config=ServerConfig())
        server = TestServer(create_app(services))
        await server.start_server(shutdown_timeout=WAIT)
        client = TestClient(server)
        await client.start_server()
        try:
            yield Node(store, services, server, client, stack)
        finally:
            await client.close()


async def _stopping(services: Services) -> None:
    """Return once the shutdown has begun ending the node's turns (its ``close`` runs)."""
    detached, begun = services.engine.detached, asyncio.Event()
    close = detached.close

    async def closing() -> int:
        begun.set()
        return await close()

    detached.close = closing  # type: ignore[method-assign]
    await begun.wait()
    assert services.stopping


async def test_a_turn_whose_begin_is_in_flight_at_shutdown_ends_with_the_server(
        node: Node) -> None:
    chat = await node.store.create_chat(owner="alice")
    node.stack.emulators["openai"].faults.push(Fault(delay=60))  # it would run on a minute
    node.store.gate = True
    post = asyncio.ensure_future(node.client.post(
        f"/api/chats/{chat.id}/turns", json=turn_body(), headers=AUTH))
    async with asyncio.timeout(WAIT):
        await node.store.entered.wait()
        stopping = asyncio.ensure_future(_stopping(node.services))
        closing = asyncio.ensure_future(node.server.close())
        await stopping
        node.store.go.set()  # the begin lands after the shutdown counted its turns
        response = await post
        assert response.status == 200, await response.text()
        events, _ = parse_sse(await response.text())  # a whole body: ended, not cut
        await closing
    assert events[-1].event == "turn_aborted", events[-1:]
    assert events[-1].data["reason"] == "cancelled"
    assert node.services.engine.detached.live == {}  # nothing runs past the shutdown
    assert (await node.store.load_chat(chat.id)).active_turn_id is None
    (turn,) = await node.store.list_turns(chat.id)
    assert (turn.status, turn.reason) == (TurnStatus.ABORTED, "cancelled")
    assert node.services.cancelled_at_shutdown == 1


async def test_a_turn_asked_for_once_the_shutdown_began_is_refused_before_its_begin(
        node: Node) -> None:
    chat = await node.store.create_chat(owner="alice")
    node.stack.emulators["openai"].faults.push(Fault(delay=60))
    first = await node.client.post(f"/api/chats/{chat.id}/turns", json=turn_body(),
                                   headers=AUTH)
    assert first.status == 200
    await first.content.readuntil(b"\n\n")  # it runs: the shutdown has a turn to end
    other = await node.store.create_chat(owner="alice")
    async with asyncio.timeout(WAIT):
        stopping = asyncio.ensure_future(_stopping(node.services))
        closing = asyncio.ensure_future(node.server.close())
        await stopping
        # The site takes no new connection now; a request read on one already open
        # reaches the route, which starts the turn through ``Services.start_turn``.
        with pytest.raises(ApiError) as refused:
            await node.services.start_turn(other.id, TurnInput(
                provider="openai", model="gpt-4o", system_prompt="", user_text="late",
                owner="alice"))
        await closing
    assert (refused.value.status, refused.value.error) == (503, "shutting_down")
    assert refused.value.response().headers["Retry-After"] == "1"
    assert await node.store.list_turns(other.id) == ()  # nothing begun, nothing stored
    assert node.services.limits.turns.get("alice", 0) == 0
