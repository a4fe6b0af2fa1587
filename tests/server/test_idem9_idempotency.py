"""A retried turn request runs one turn (helper "idem9").

A client whose POST reached the server but whose connection died before the answer
retries it; before, that ran and billed a second turn. With the same client key (the
``Idempotency-Key`` header; on ``/api/ui-messages`` the sent user message's id) the
retry runs nothing and calls no provider: it is answered with the first turn, whose
events it follows from the start. Checked on every store.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests import pg_support
from tests.server.conftest import TOKENS, TurnstateTestServer
from tests.server.support import Api, parse_sse, turn_body
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.server import SERVER_REGISTRY, ServerConfig, create_app, make_services
from turnstate.storage import MemoryStore, PostgresStore, SqliteStore, Store

KEY = {"Idempotency-Key": "retry-7f3a"}


def _opener(kind: str, tmp_path: Path) -> Callable[[], AbstractAsyncContextManager[Store]]:
    if kind == "postgres":
        return lambda: PostgresStore.open(pg_support.DSN, schema=pg_support.SCHEMA)
    if kind == "sqlite":
        return lambda: SqliteStore.open(tmp_path / "chats.db")
    return _memory


@contextlib.asynccontextmanager
async def _memory() -> AsyncIterator[Store]:
    yield MemoryStore()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def kapi(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Api]:
    if request.param == "postgres":
        request.getfixturevalue("pg_schema")
    config = ServerConfig()
    async with EmulatedProviders() as stack, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport, \
            _opener(request.param, tmp_path)() as store:
        engine = TurnEngine(store, stack.adapters, transport, registry=SERVER_REGISTRY)
        services = make_services(engine, TOKENS, config=config, emulators=stack)
        server = TurnstateTestServer(create_app(services))
        await server.start_server(**config.runner_options())
        async with TestClient(server) as client:
            yield Api(client=client, services=services, stack=stack)


def _sent(api: Api) -> int:
    return sum(len(e.requests) for e in api.stack.emulators.values())


async def _post(api: Api, chat_id: str, text: str = "hello",
                headers: dict[str, str] | None = None) -> tuple[int, Any, str]:
    response = await api.call("POST", f"/api/chats/{chat_id}/turns", json=turn_body(text),
                              headers=headers or {})
    return response.status, response.headers, await response.text()


def _final(body: str) -> dict[str, Any]:
    events, _ = parse_sse(body)
    assert events[-1].event == "turn_completed", body
    return events[-1].data


async def test_a_retried_post_runs_and_bills_one_turn(kapi: Api) -> None:
    api = kapi
    chat_id = await api.new_chat()
    status, headers, first = await _post(api, chat_id, headers=KEY)
    assert status == 200
    sent = _sent(api)
    assert sent == 1
    status, again, second = await _post(api, chat_id, headers=KEY)  # the lost answer's retry
    assert status == 200, second
    assert _sent(api) == sent  # no provider call
    assert again["X-Turn-Id"] == headers["X-Turn-Id"]
    assert again["Idempotent-Replayed"] == "true"
    assert _final(second)["text"] == _final(first)["text"]
    detail = await api.json("GET", f"/api/chats/{chat_id}")
    assert [m["role"] for m in detail["messages"]] == ["user", "assistant"]  # one turn
    status, _, _third = await _post(api, chat_id, headers={"Idempotency-Key": "other"})
    assert status == 200 and _sent(api) == sent + 1  # another key: another turn
    status, _, _plain = await _post(api, chat_id)  # no key: a turn as before
    assert status == 200 and _sent(api) == sent + 2


async def test_a_key_reused_for_another_question_is_refused(kapi: Api) -> None:
    api = kapi
    chat_id = await api.new_chat()
    assert (await _post(api, chat_id, headers=KEY))[0] == 200
    status, _, body = await _post(api, chat_id, "another question", headers=KEY)
    answer = json.loads(body)
    assert (status, answer["error"], answer["field"]) == (
        422, "idempotency_key_reused", "Idempotency-Key")
    assert _sent(api) == 1


async def test_a_key_of_a_deleted_question_runs_anew(api: Api) -> None:
    """A key names a question the chat holds: once "delete from here" removed it, the
    key is free and the same request asks again."""
    chat_id = await api.new_chat()
    assert (await _post(api, chat_id, headers=KEY))[0] == 200
    await api.json("DELETE", f"/api/chats/{chat_id}/messages/1")  # delete from here
    status, headers, body = await _post(api, chat_id, headers=KEY)
    assert status == 200 and "Idempotent-Replayed" not in headers, body
    assert _sent(api) == 2


@pytest.mark.parametrize("key", ["", "x" * 256, "caf\u00e9", "a\tb"])
async def test_a_bad_key_is_refused_naming_the_header(api: Api, key: str) -> None:
    chat_id = await api.new_chat()
    status, _, body = await _post(api, chat_id, headers={"Idempotency-Key": key})
    answer = json.loads(body)
    assert (status, answer["field"]) == (400, "Idempotency-Key"), body
    assert _sent(api) == 0


async def test_two_posts_with_one_key_at_once_run_one_turn(kapi: Api) -> None:
    """Before, the second of two was ``409 chat_busy``: now it follows the first."""
    api = kapi
    chat_id = await api.new_chat()
    (one, first_headers, first), (two, second_headers, second) = await asyncio.gather(
        _post(api, chat_id, headers=KEY), _post(api, chat_id, headers=KEY))
    assert (one, two) == (200, 200), (first, second)
    assert _sent(api) == 1
    assert first_headers["X-Turn-Id"] == second_headers["X-Turn-Id"]
    assert _final(first)["text"] == _final(second)["text"]
