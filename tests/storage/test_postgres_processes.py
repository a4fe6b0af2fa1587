"""Several OS processes, one PostgreSQL database (issue 14, point 3).

Four worker processes (``pg_worker.py``), each with its own ``TurnEngine`` and
``PostgresStore`` on the same schema, run 200 turns over 20 chats in 50 rounds: in each
round all four begin a turn on the same chat at once (a barrier in the database), and
the one that wins holds the lease, inside a tool call, until the three others have been
refused. The emulators run here, in the test process, so a cursor made through one node
is valid on all. A fifth process begins a turn with a short
lease and is killed with SIGKILL while its tool runs; another process (this one)
reclaims the chat once the database's clock passes the lease. Synchronisation is on
observable conditions only: the workers' report lines, the victim's ``READY`` line, and
bounded polling of the database.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests import pg_support
from tests.storage import pg_worker
from turnstate.core import parse_envelope
from turnstate.core._conversation import MessageStatus, Role
from turnstate.emulators._base import items_from_messages
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import PostgresStore, TurnStatus

ROOT = Path(__file__).resolve().parents[2]
WORKERS, TURNS, CHATS = 4, 50, 20
VICTIM_LEASE = 1.0


async def _spawn(config: dict[str, Any]) -> asyncio.subprocess.Process:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.storage.pg_worker", json.dumps(config), cwd=ROOT,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def _reports(process: asyncio.subprocess.Process) -> list[dict[str, Any]]:
    stdout, stderr = await process.communicate()
    assert process.returncode == 0, stderr.decode()
    return [json.loads(line) for line in stdout.decode().splitlines()]


async def _until(store: PostgresStore, sql: str, *params: Any, within: float = 20.0) -> None:
    """Poll the database (bounded) until ``sql`` returns true."""
    deadline = time.monotonic() + within
    while not (await store.fetch_raw(sql, params))[0][0]:
        assert time.monotonic() < deadline, f"timed out waiting for: {sql}"
        await asyncio.sleep(0.05)


@pytest.fixture
async def world(pg_schema: str) -> AsyncIterator[tuple[EmulatedProviders, PostgresStore, str]]:
    schema = f"{pg_schema}_nodes"
    async with EmulatedProviders(["openai", "gemini", "anthropic"]) as stack, \
            PostgresStore.open(pg_support.DSN, schema=schema, pool_max=2) as store:
        await store.fetch_raw("TRUNCATE chats, messages, turns CASCADE")
        await store.fetch_raw("DROP TABLE IF EXISTS mp_sync")
        await store.fetch_raw("CREATE TABLE mp_sync (round integer, worker integer, what text)")
        yield stack, store, schema


async def _kill_mid_turn(base: dict[str, Any], store: PostgresStore) -> str:
    await store.create_chat(owner="nodes", chat_id="victim")
    victim = await _spawn({**base, "mode": "victim", "chat": "victim", "turn_id": "doomed",
                           "lease_seconds": VICTIM_LEASE})
    assert victim.stdout is not None
    line = await asyncio.wait_for(victim.stdout.readline(), timeout=60)
    assert line.decode().strip() == "READY doomed"
    victim.send_signal(signal.SIGKILL)
    await victim.wait()
    return "doomed"


async def test_four_processes_share_one_database(
        world: tuple[EmulatedProviders, PostgresStore, str]) -> None:
    """Every turn commits or is refused before any provider call; no chat has two
    holders at once; histories are gap-free; invariant 2 holds; a killed process's
    lease is reclaimed by another process after it expires, its message aborted."""
    stack, store, schema = world
    for index in range(CHATS):
        await store.create_chat(owner="nodes", chat_id=f"c{index}")
    base = {"dsn": pg_support.DSN, "schema": schema,
            "urls": {name: stack.base_url(name) for name in stack.emulators}}
    doomed = await _kill_mid_turn(base, store)
    workers = [await _spawn({**base, "mode": "turns", "worker": w, "turns": TURNS,
                             "chats": CHATS, "workers": WORKERS}) for w in range(WORKERS)]
    reports = [r for rs in await asyncio.gather(*map(_reports, workers)) for r in rs]
    _check_outcomes(reports, stack)
    _check_single_holder(reports)
    await _check_histories(store, stack, reports)
    await _check_reclaim(store, stack, doomed)


def _check_outcomes(reports: list[dict[str, Any]], stack: EmulatedProviders) -> None:
    outcomes = Counter(r["outcome"] for r in reports)
    assert len(reports) == WORKERS * TURNS
    # One commit per round; the other workers, beginning on the same chat meanwhile,
    # were refused.
    assert outcomes == {"committed": TURNS, "busy": (WORKERS - 1) * TURNS}, outcomes
    assert all(r["events"] == 0 for r in reports if r["outcome"] == "busy")
    # Refused turns made no provider call: every request the emulators saw (the victim's
    # one included) belongs to a committed turn.
    seen = sum(len(emulator.requests) for emulator in stack.emulators.values())
    assert seen == 1 + sum(r["requests"] for r in reports if r["outcome"] == "committed")


def _check_single_holder(reports: list[dict[str, Any]]) -> None:
    """Per chat, the spans between a turn's first event and its last before the commit
    (all inside its lease; monotonic time is shared by the processes) never overlap."""
    by_chat: dict[str, list[tuple[float, float]]] = {}
    for r in reports:
        if r["outcome"] == "committed":
            by_chat.setdefault(r["chat"], []).append(tuple(r["held"]))  # type: ignore[arg-type]
    for chat, spans in by_chat.items():
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert end < start, f"{chat}: two turns held the chat at once"


async def _check_histories(store: PostgresStore, stack: EmulatedProviders,
                           reports: list[dict[str, Any]]) -> None:
    committed = {r["turn"] for r in reports if r["outcome"] == "committed"}
    found: Counter[str] = Counter()
    for index in range(CHATS):
        chat = await store.load_chat(f"c{index}")
        assert chat.active_turn_id is None
        messages = await store.list_messages(chat.id)
        assert [m.seq for m in messages] == list(range(1, len(messages) + 1))
        assert all(m.status == MessageStatus.COMPLETED for m in messages)
        assert [m.role for m in messages] == [Role.USER, Role.ASSISTANT] * (len(messages) // 2)
        found.update(m.id.removesuffix(":assistant") for m in messages
                     if m.role == Role.ASSISTANT)
        assert chat.version == len(messages) // 2
        if chat.last_provider_state is not None:  # a durable chat: invariant 2
            envelope = parse_envelope(chat.last_provider_state)
            emulator: Any = stack.emulators[envelope.provider]
            history = await store.load_history(chat.id)
            assert emulator.conversation_for(envelope.cursor) == items_from_messages(history)
    assert set(found) == committed and set(found.values()) == {1}


async def _check_reclaim(store: PostgresStore, stack: EmulatedProviders, doomed: str) -> None:
    held = await store.load_chat("victim")
    assert held.active_turn_id == doomed
    await _until(store, "SELECT active_turn_expires_at <= clock_timestamp() FROM chats "
                        "WHERE id = $1", "victim")
    async with AiohttpTransport() as transport:
        engine = TurnEngine(store, stack.adapters, transport)
        turn = TurnInput(provider="openai", model="gpt-4o", system_prompt=pg_worker.PROMPT,
                         user_text="after the crash", turn_id="survivor")
        events = [event async for event in engine.run_turn("victim", turn)]
    assert events[-1].type == "turn_completed"
    record = await store.load_turn(doomed)
    assert (record.status, record.reason) == (TurnStatus.ABORTED, "lease_expired")
    messages = await store.list_messages("victim")
    assert [m.status for m in messages] == [MessageStatus.ABORTED] * 2 + [
        MessageStatus.COMPLETED] * 2
