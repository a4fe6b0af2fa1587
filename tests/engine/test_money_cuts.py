"""A request cut mid-answer is billed all the same (money, 2026-12-04), against the
emulators over loopback HTTP: a dropped connection, a malformed frame, an idle timeout,
the user's stop, and a restart after a cut. What the stream said before the cut
(Anthropic's ``message_start`` input and cache counts) joins the turn's usage and cost;
a stream that said nothing (OpenAI's ``response.created``) leaves the cost unknown, not
$0. Every one of these turns reported nothing for the cut request before."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import attrs
import pytest

from tests.engine.support import collect, make_turn
from tests.faults.catalogue import stream_error
from turnstate.core._conversation import MessageStatus, Usage
from turnstate.core._cost import audit_cost, turn_cost, usd_text
from turnstate.core._events import TurnAborted, TurnCompleted
from turnstate.core._prices import PRICES
from turnstate.emulators import EmulatedProviders, Fault
from turnstate.engine import TurnEngine
from turnstate.providers import RetryPolicy
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore, decode_audit

SONNET = "claude-sonnet-4-6"
PRICE = PRICES["anthropic", SONNET]
PROMPT = "You are a careful travel agent. " + "Answer with care and detail. " * 300
QUESTION = "Tell me about the old town, the tram and the river. " * 10


@attrs.define
class Stack:
    providers: EmulatedProviders
    engine: TurnEngine
    store: MemoryStore

    async def chat(self) -> str:
        return (await self.store.create_chat(owner="alice")).id

    def fault(self, provider: str, fault: Fault) -> None:
        self.providers.emulators[provider].faults.push(fault)


async def no_sleep(_: float) -> None:
    return None


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with EmulatedProviders(["anthropic", "openai"]) as providers, \
            AiohttpTransport(sleep=no_sleep, idle_timeout=0.3,
                             retry=RetryPolicy(max_attempts=3)) as transport:
        store = MemoryStore()
        yield Stack(providers, TurnEngine(store, providers.adapters, transport), store)


def anthropic_turn(text: str = QUESTION) -> Any:
    return make_turn(text, provider="anthropic", model=SONNET, prompt=PROMPT)


async def uncut_usage(stack: Stack, turns: int = 1) -> Usage:
    """The usage of the last of ``turns`` uncut turns of a fresh chat: what the same
    request bills when its stream is whole."""
    chat_id = await stack.chat()
    for _ in range(turns):
        final = (await collect(stack.engine.run_turn(chat_id, anthropic_turn()))).events[-1]
        assert isinstance(final, TurnCompleted)
    return final.stats.usage


async def answer_of(stack: Stack, chat_id: str) -> Any:
    return (await stack.store.list_messages(chat_id))[-1]


@pytest.mark.parametrize("fault", [Fault(cut_after=6), Fault(malformed_after=6),
                                   Fault(stall_after=6)],
                         ids=["connection_lost", "malformed_frame", "idle_timeout"])
async def test_an_anthropic_stream_cut_mid_answer_bills_what_message_start_said(
    stack: Stack, fault: Fault,
) -> None:
    """The prompt was read whole before the first token: ``message_start``'s input and
    cache counts are the request's, exactly; the output is estimated over what
    streamed. The aborted answer stores them and the audit counts the cut request."""
    whole = await uncut_usage(stack, turns=3)
    chat_id = await stack.chat()
    for _ in range(2):
        assert (await collect(stack.engine.run_turn(chat_id, anthropic_turn()))).committed
    stack.fault("anthropic", fault)
    outcome = await collect(stack.engine.run_turn(chat_id, anthropic_turn()))
    final = outcome.events[-1]
    assert isinstance(final, TurnAborted) and final.reason == "provider_failed", final
    assert any(e.type == "text_delta" for e in outcome.events)  # output had shown
    usage = final.stats.usage  # the same prompt: the same input (the cache now warmer)
    assert usage.input_tokens == whole.input_tokens and usage.cached_input_tokens > 0
    assert 1 <= usage.output_tokens < whole.output_tokens
    assert final.stats.cost == turn_cost(usage, PRICE)
    answer = await answer_of(stack, chat_id)
    assert answer.status is MessageStatus.ABORTED and answer.usage == usage
    assert audit_cost(answer.provider_state) == usd_text(final.stats.cost.total)
    metadata = decode_audit(answer.provider_state or "").metadata or {}
    assert metadata["cutRequests"] == 1 and "usageMissing" not in metadata


async def test_an_openai_stream_cut_mid_answer_leaves_the_cost_unknown(stack: Stack) -> None:
    """``response.created`` has no usage: the cut request was billed for figures nobody
    sent, so the turn's cost is None and its answer's audit says ``usageMissing`` (it
    stored nothing: the chat's cost left the request out, as if it were free)."""
    chat_id = await stack.chat()
    stack.fault("openai", Fault(cut_after=8))
    outcome = await collect(stack.engine.run_turn(chat_id, make_turn(QUESTION)))
    final = outcome.events[-1]
    assert isinstance(final, TurnAborted) and final.reason == "provider_failed", final
    assert any(e.type == "text_delta" for e in outcome.events)
    assert final.stats.cost is None
    answer = await answer_of(stack, chat_id)
    assert answer.usage is None and audit_cost(answer.provider_state) is None
    metadata = decode_audit(answer.provider_state or "").metadata or {}
    assert metadata["usageMissing"] is True and metadata["cutRequests"] == 1


async def test_a_restart_after_a_cut_bills_both_requests(stack: Stack) -> None:
    """A connection lost after ``message_start`` and before any output: the call is
    sent again and the turn commits. The provider billed the first request's prompt
    too: the turn's usage holds both (it held the second alone)."""
    whole = await uncut_usage(stack)
    chat_id = await stack.chat()
    sent = len(stack.providers.emulators["anthropic"].requests)
    stack.fault("anthropic", Fault(cut_after=1))
    final = (await collect(stack.engine.run_turn(chat_id, anthropic_turn()))).events[-1]
    assert isinstance(final, TurnCompleted), final
    assert len(stack.providers.emulators["anthropic"].requests) == sent + 2
    cut = Usage(input_tokens=whole.input_tokens, output_tokens=1,
                cached_input_tokens=whole.cached_input_tokens,
                cache_write_tokens=whole.cache_write_tokens)
    assert final.stats.usage == whole + cut
    expected = turn_cost(whole, PRICE) + turn_cost(cut, PRICE)  # type: ignore[operator]
    assert final.stats.cost == expected
    metadata = decode_audit((await answer_of(stack, chat_id)).provider_state or "").metadata
    assert metadata is not None and metadata["cutRequests"] == 1
    assert metadata["costUsd"]["total"] == usd_text(expected.total)


async def test_an_error_event_from_the_provider_is_not_a_cut(stack: Stack) -> None:
    """An in-stream ``overloaded_error`` is the provider's own failure of the request
    (decisions.md: counted as not billed), unlike a cut on this side: the restart's
    turn bills one request."""
    whole = await uncut_usage(stack)
    chat_id = await stack.chat()
    stack.fault("anthropic", Fault(frame_after=1, frame=stream_error(
        "anthropic", "Overloaded", overloaded=True)))
    final = (await collect(stack.engine.run_turn(chat_id, anthropic_turn()))).events[-1]
    assert isinstance(final, TurnCompleted), final
    assert final.stats.usage == whole
    metadata = decode_audit((await answer_of(stack, chat_id)).provider_state or "").metadata
    assert metadata is not None and "cutRequests" not in metadata


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_stopped_turn_bills_the_request_it_cut(stack: Stack, provider: str) -> None:
    """The user's stop mid-answer (detached turn, a stream that stalls after some
    text): the stopped answer keeps the text shown and what the cut request billed:
    Anthropic's input priced, OpenAI's unknown (both stored nothing)."""
    chat_id = await stack.chat()
    stack.fault(provider, Fault(stall_after=6 if provider == "anthropic" else 8))
    turn = anthropic_turn() if provider == "anthropic" else make_turn(QUESTION)
    live = await stack.engine.start_turn(chat_id, turn)
    async with asyncio.timeout(10):
        following = await stack.engine.follow(chat_id, live.turn_id)
        async for logged in following.events:
            if logged.type == "text_delta":
                break
        await stack.engine.stop(live.turn_id, chat_id=chat_id)
        await stack.engine.detached.settled()
    final = live.final
    assert isinstance(final, TurnAborted) and final.reason == "stopped", final
    answer = await answer_of(stack, chat_id)
    assert answer.status is MessageStatus.ABORTED and answer.text()
    metadata = decode_audit(answer.provider_state or "").metadata or {}
    assert metadata["cutRequests"] == 1
    if provider == "anthropic":
        assert final.stats.usage.input_tokens > 1_000 and final.stats.cost is not None
        assert answer.usage == final.stats.usage
        assert audit_cost(answer.provider_state) == usd_text(final.stats.cost.total)
    else:
        assert final.stats.cost is None and metadata["usageMissing"] is True


async def test_a_consumer_that_leaves_mid_answer_leaves_the_request_billed(
    stack: Stack,
) -> None:
    """The caller stops reading at the first delta (``cancelled``): the request it cut
    is stored with its ``message_start`` figures."""
    chat_id = await stack.chat()
    async with aclosing(stack.engine.run_turn(chat_id, anthropic_turn())) as events:
        async for event in events:
            if event.type == "text_delta":
                break
    turn = (await stack.store.list_turns(chat_id, limit=1))[0]
    assert turn.reason == "cancelled"
    answer = await answer_of(stack, chat_id)
    assert answer.usage is not None and answer.usage.input_tokens > 1_000
    metadata = decode_audit(answer.provider_state or "").metadata or {}
    assert metadata["cutRequests"] == 1
    assert metadata["costUsd"]["total"] == usd_text(turn_cost(answer.usage, PRICE).total)  # type: ignore[union-attr]
