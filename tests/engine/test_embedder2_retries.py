"""A turn's HTTP requests are counted honestly (embedder2): ``TurnStats.retries`` counts
the requests sent beyond the first of each provider call (the transport's retries and
restarts), in the events, the event JSON, the audit's ``sent``, a retried turn id's
stored outcome, the server's turn view and ``turnstate inspect``. Before, a restarted
call showed one request while the provider billed two, and nothing said so."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest

from tests.engine.support import collect, make_turn
from turnstate import event_json
from turnstate.commands.inspect import inspect_chat
from turnstate.core._bill import sent_counts
from turnstate.core._events import TurnCompleted, TurnStats
from turnstate.emulators import EmulatedProviders, Fault
from turnstate.engine import TurnEngine
from turnstate.providers import RetryPolicy
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore, SqliteStore, decode_audit, lean_message

SONNET = "claude-sonnet-4-6"


@attrs.define
class Stack:
    providers: EmulatedProviders
    transport: AiohttpTransport


async def no_sleep(_: float) -> None:
    return None


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with EmulatedProviders(["anthropic", "openai"]) as providers, \
            AiohttpTransport(sleep=no_sleep, retry=RetryPolicy(max_attempts=3)) as transport:
        yield Stack(providers, transport)


async def one_turn(stack: Stack, store: MemoryStore | SqliteStore, fault: Fault | None,
                   provider: str = "anthropic", turn_id: str = "t1") -> TurnCompleted:
    engine = TurnEngine(store, stack.providers.adapters, stack.transport)
    chat_id = (await store.create_chat(owner="alice", chat_id="c1")).id
    if fault is not None:
        stack.providers.emulators[provider].faults.push(fault)
    model = SONNET if provider == "anthropic" else "gpt-4o"
    final = (await collect(engine.run_turn(chat_id, make_turn(
        "hello", provider=provider, model=model, turn_id=turn_id)))).events[-1]
    assert isinstance(final, TurnCompleted), final
    return final


@pytest.mark.parametrize(("provider", "fault"), [
    ("anthropic", Fault(cut_after=1)),  # message_start, then the connection drops: restart
    ("anthropic", Fault(status=529, body={"type": "error", "error": {
        "type": "overloaded_error", "message": "Overloaded"}})),  # the transport's retry
    ("openai", Fault(status=503, body={"error": {"message": "busy"}})),
])
async def test_a_retried_call_counts_its_second_http_request(
        stack: Stack, provider: str, fault: Fault) -> None:
    store = MemoryStore()
    sent = len(stack.providers.emulators[provider].requests)
    final = await one_turn(stack, store, fault, provider)
    assert len(stack.providers.emulators[provider].requests) == sent + 2
    assert (final.stats.requests, final.stats.retries) == (1, 1)
    assert json.loads(event_json(final))["stats"]["retries"] == 1
    answer = (await store.list_messages("c1"))[-1]
    metadata = decode_audit(answer.provider_state or "").metadata
    assert metadata is not None and metadata["sent"]["retries"] == 1
    assert sent_counts(metadata)[2] == 1
    # a client's retry of the turn id gets the stored outcome, its retries included
    engine = TurnEngine(store, stack.providers.adapters, stack.transport)
    again = (await collect(engine.run_turn("c1", make_turn(
        "hello", provider=provider, model=final_model(provider), turn_id="t1")))).events[-1]
    assert isinstance(again, TurnCompleted) and again.stats.retries == 1


def final_model(provider: str) -> str:
    return SONNET if provider == "anthropic" else "gpt-4o"


async def test_a_call_sent_once_has_no_retries_and_its_audit_is_unchanged(
        stack: Stack) -> None:
    store = MemoryStore()
    final = await one_turn(stack, store, None)
    assert (final.stats.requests, final.stats.retries) == (1, 0)
    answer = (await store.list_messages("c1"))[-1]
    metadata = decode_audit(answer.provider_state or "").metadata
    assert metadata is not None and set(metadata["sent"]) == {"requests", "requestBytes"}


def test_an_audit_written_before_retries_were_counted_reads_zero() -> None:
    assert sent_counts({"sent": {"requests": 2, "requestBytes": 10}}) == (2, 10, 0)
    assert sent_counts({"sent": {"requests": 2, "requestBytes": 10, "retries": 3}}) \
        == (2, 10, 3)
    assert sent_counts({}) == (0, 0, 0)
    assert sent_counts(None) == (0, 0, 0)
    assert TurnStats().retries == 0


async def test_inspect_and_the_server_view_show_the_retries(stack: Stack,
                                                            tmp_path: Path) -> None:
    from turnstate.server._views import turn_view

    db = tmp_path / "chats.db"
    async with SqliteStore.open(db) as store:
        await one_turn(stack, store, Fault(cut_after=1))
        turn = await store.load_turn("t1")
        answer = (await store.list_messages("c1"))[-1]
    view = turn_view(lean_message(answer), turn)
    assert view is not None and view["retries"] == 1
    report = await inspect_chat(str(db), "c1")
    assert "1 provider call(s) in 2 HTTP requests (1 retried)" in report
