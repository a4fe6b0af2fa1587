"""An edit's copy sent to another node runs nothing (helper "places12").

edits10 left one window: two servers on one PostgreSQL database, the same keyed edit
(``Idempotency-Key``, ``replace_from``) sent to both; node B checks the key (nothing holds
it yet), node A begins, runs and ends the edit's turn, then B begins. B's begin cut A's
question (a key held at the cut's seq was ignored, as the cut frees it) and asked and
billed again. The begin now takes the key over only from the turn the check saw holding
it (``CutExpected``), in its write: B's begin finds A's turn holding the key, checks
again, and answers with A's turn. The per-process lock ``_one_edit`` is left out (each
node has its own); B's begin is held until A's turn ended, by events, no sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests import pg_support
from tests.server.conftest import TOKENS, TurnstateTestServer
from tests.server.support import Api, parse_sse, turn_body
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.server import SERVER_REGISTRY, ServerConfig, _edit_retry, create_app, make_services
from turnstate.storage import PostgresStore


@contextlib.asynccontextmanager
async def _node(stack: EmulatedProviders) -> AsyncIterator[Api]:
    config = ServerConfig()
    async with AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport, \
            PostgresStore.open(pg_support.DSN, schema=pg_support.SCHEMA) as store:
        engine = TurnEngine(store, stack.adapters, transport, registry=SERVER_REGISTRY)
        services = make_services(engine, TOKENS, config=config, emulators=stack)
        server = TurnstateTestServer(create_app(services))
        await server.start_server(**config.runner_options())
        async with TestClient(server) as client:
            yield Api(client=client, services=services, stack=stack)


@pytest.fixture
async def nodes(pg_schema: str, monkeypatch: pytest.MonkeyPatch
                ) -> AsyncIterator[tuple[Api, Api]]:
    monkeypatch.setattr(_edit_retry, "_one_edit", lambda chat, key: contextlib.nullcontext())
    async with EmulatedProviders() as stack, _node(stack) as a, _node(stack) as b:
        yield a, b


def _sent(api: Api) -> int:
    return sum(len(e.requests) for e in api.stack.emulators.values())


async def _edit(api: Api, chat: str) -> tuple[int, Any, str]:
    response = await api.call("POST", f"/api/chats/{chat}/turns",
                              json={**turn_body("second, edited"), "replace_from": 3},
                              headers={"Idempotency-Key": "edit-1"})
    return response.status, response.headers, await response.text()


async def test_an_edits_copy_on_another_node_after_the_first_ended_runs_nothing(
        nodes: tuple[Api, Api], monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = nodes
    chat = await a.new_chat()
    await a.turn(chat, text="first")
    await a.turn(chat, text="second")
    at_begin, a_done = asyncio.Event(), asyncio.Event()
    begin = b.services.store.begin_turn

    async def held(*args: Any, **kwargs: Any) -> Any:  # B checked; its begin waits for A
        at_begin.set()
        await a_done.wait()
        return await begin(*args, **kwargs)

    monkeypatch.setattr(b.services.store, "begin_turn", held)
    asked = _sent(a)
    copy = asyncio.create_task(_edit(b, chat))
    await at_begin.wait()
    status, _, first = await _edit(a, chat)
    assert status == 200 and parse_sse(first)[0][-1].event == "turn_completed"
    view = await a.json("GET", f"/api/chats/{chat}")
    a_done.set()
    status, headers, second = await copy
    assert _sent(a) == asked + 1  # 2 before: B cut A's question and asked again
    assert status == 200, second
    assert headers.get("Idempotent-Replayed") == "true"
    assert headers["X-Turn-Id"] == view["messages"][2]["id"].split(":")[0]
    assert await a.json("GET", f"/api/chats/{chat}") == view
