"""Finish reasons on turn_completed (normalised, the provider's own beside it, in the
audit), a length stop inside a tool loop ending the turn cleanly, and the provider's
failure facts on turn_aborted."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.engine.support import collect, make_turn
from turnstate.core import TextPart, Usage
from turnstate.core._events import TurnAborted, TurnCompleted
from turnstate.emulators import EmulatedProviders, Fault, Reply, ScriptedCall
from turnstate.engine import TurnEngine
from turnstate.engine._follow import synthesized_final
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.storage import MemoryStore, TurnCommit, TurnStart, decode_audit

MODELS = {"openai": "gpt-4o", "gemini": "gemini-2.5-flash", "anthropic": "claude-sonnet-4-5",
          "openai-compatible": "gpt-4o", "deepseek": "deepseek-chat"}
RAW_LENGTH = {"openai": "max_output_tokens", "gemini": "incomplete", "anthropic": "max_tokens",
              "openai-compatible": "length", "deepseek": "length"}


class Live:
    def __init__(self, stack: EmulatedProviders, engine: TurnEngine, store: MemoryStore) -> None:
        self.stack, self.engine, self.store = stack, engine, store

    async def turn(self, chat_id: str, text: str, provider: str) -> TurnCompleted | TurnAborted:
        outcome = await collect(self.engine.run_turn(chat_id, make_turn(
            text, provider=provider, model=MODELS[provider])))
        return outcome.final

    async def audit_metadata(self, chat_id: str) -> dict[str, Any]:
        last = (await self.store.load_history(chat_id))[-1]
        assert last.provider_state is not None
        return dict(decode_audit(last.provider_state).metadata or {})

    def push(self, provider: str, *replies: Reply) -> None:
        self.stack.emulators[provider].model.push(*replies)  # type: ignore[attr-defined]


@pytest.fixture
async def live() -> AsyncIterator[Live]:
    async with EmulatedProviders() as stack, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport:
        store = MemoryStore()
        yield Live(stack, TurnEngine(store, stack.adapters, transport), store)


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_a_cut_answer_completes_with_length_and_the_raw_reason_in_the_audit(
    live: Live, provider: str,
) -> None:
    chat = await live.store.create_chat(owner="o")
    final = await live.turn(chat.id, "[[cutoff]] tell me a rather long story please", provider)
    assert isinstance(final, TurnCompleted)
    assert (final.finish_reason, final.finish_reason_raw) == ("length", RAW_LENGTH[provider])
    assert final.text and final.text in "You said: tell me a rather long story please"
    metadata = await live.audit_metadata(chat.id)
    assert metadata["finishReason"] == "length"
    assert metadata["finishReasonRaw"] == RAW_LENGTH[provider]


@pytest.mark.parametrize("provider", ["openai", "anthropic", "openai-compatible"])
async def test_a_refusal_completes_with_refusal(live: Live, provider: str) -> None:
    chat = await live.store.create_chat(owner="o")
    final = await live.turn(chat.id, "[[refuse]] something bad", provider)
    assert isinstance(final, TurnCompleted) and final.finish_reason == "refusal"


async def test_a_normal_answer_finishes_with_stop(live: Live) -> None:
    chat = await live.store.create_chat(owner="o")
    final = await live.turn(chat.id, "hello", "anthropic")
    assert isinstance(final, TurnCompleted)
    assert (final.finish_reason, final.finish_reason_raw) == ("stop", "end_turn")
    assert (await live.audit_metadata(chat.id))["finishReason"] == "stop"


CALL = ScriptedCall(name="weather", arguments='{"city": "Oslo"}')


@pytest.mark.parametrize("provider", ["anthropic", "openai-compatible", "deepseek"])
async def test_a_length_stop_inside_the_local_loop_ends_the_turn_with_what_was_said(
    live: Live, provider: str,
) -> None:
    chat = await live.store.create_chat(owner="o")
    live.push(provider, Reply(text="", calls=(CALL,)),
              Reply(text="It is sunny in Oslo and", calls=(CALL,), truncated=True))
    final = await live.turn(chat.id, "weather in Oslo?", provider)
    assert isinstance(final, TurnCompleted), final
    assert final.finish_reason == "length" and final.text == "It is sunny in Oslo and"
    assert final.stats.tool_calls == 1 and final.stats.requests == 2  # the cut call never ran
    metadata = await live.audit_metadata(chat.id)
    assert [c["name"] for c in metadata["droppedToolCalls"]] == ["weather"]
    history = await live.store.load_history(chat.id)
    kinds = [type(p).__name__ for p in history[-1].parts]
    assert kinds == ["ToolCallPart", "ToolResultPart", "TextPart"]
    again = await live.turn(chat.id, "and tomorrow?", provider)  # the history replays cleanly
    assert isinstance(again, TurnCompleted)


@pytest.mark.parametrize("provider", ["openai", "gemini"])
async def test_a_length_stop_with_calls_on_a_cursor_commits_no_cursor(
    live: Live, provider: str,
) -> None:
    chat = await live.store.create_chat(owner="o")
    live.push(provider, Reply(text="Let me check", calls=(CALL,), truncated=True))
    final = await live.turn(chat.id, "weather?", provider)
    assert isinstance(final, TurnCompleted) and final.finish_reason == "length"
    assert (await live.store.load_chat(chat.id)).last_provider_state is None
    again = await live.turn(chat.id, "go on", provider)
    assert isinstance(again, TurnCompleted) and again.strategy == "replay"


async def test_a_rate_limit_carries_status_code_retryable_and_retry_after(live: Live) -> None:
    chat = await live.store.create_chat(owner="o")
    live.stack.emulators["openai"].faults.push(Fault(
        status=429, headers={"Retry-After": "20"},
        body={"error": {"message": "slow down", "type": "requests",
                        "code": "rate_limit_exceeded"}}))
    final = await live.turn(chat.id, "hello", "openai")
    assert isinstance(final, TurnAborted) and final.reason == "provider_failed"
    assert final.failure is not None
    assert (final.failure.provider, final.failure.status, final.failure.error_type,
            final.failure.code, final.failure.retryable, final.failure.retry_after) == (
        "openai", 429, "rate_limited", "rate_limit_exceeded", True, 20.0)


async def test_a_fatal_error_is_not_retryable_and_a_cancel_has_no_failure(live: Live) -> None:
    chat = await live.store.create_chat(owner="o")
    live.stack.emulators["anthropic"].faults.push(Fault(
        status=400, body={"type": "error", "error": {"type": "invalid_request_error",
                                                     "message": "bad"}}))
    final = await live.turn(chat.id, "hello", "anthropic")
    assert isinstance(final, TurnAborted) and final.failure is not None
    assert (final.failure.status, final.failure.error_type, final.failure.code,
            final.failure.retryable, final.failure.retry_after) == (
        400, "fatal", "invalid_request_error", False, None)
    chat2 = await live.store.create_chat(owner="o")
    events = live.engine.run_turn(chat2.id, make_turn("hello", provider="anthropic",
                                                      model=MODELS["anthropic"]))
    await events.__anext__()
    await events.aclose()
    turns = await live.store.list_turns(chat2.id)
    assert turns[0].reason == "cancelled"


async def test_a_length_stop_rebuilt_from_the_store_still_says_length(live: Live) -> None:
    """A retried turn id (``_retried``) and a resumed turn's final event (``_follow``) are
    rebuilt from the store: they carry the finish reason the turn ended with."""
    chat = await live.store.create_chat(owner="o")
    turn = make_turn("[[cutoff]] tell me a rather long story please", provider="anthropic",
                     model=MODELS["anthropic"], turn_id="t-cut")
    first = (await collect(live.engine.run_turn(chat.id, turn))).final
    retried = (await collect(live.engine.run_turn(chat.id, turn))).final
    resumed = await synthesized_final(live.store, chat.id, "t-cut")
    for rebuilt in (retried, resumed):
        assert isinstance(rebuilt, TurnCompleted)
        assert (rebuilt.finish_reason, rebuilt.finish_reason_raw, rebuilt.text) == (
            "length", "max_tokens", first.text)


async def test_a_rebuilt_turn_without_a_readable_audit_says_stop() -> None:
    store = MemoryStore()
    chat = await store.create_chat(owner="o")
    lease = await store.begin_turn(chat.id, TurnStart(
        turn_id="t1", user_parts=(TextPart(text="hi"),), provider="openai", model="gpt-4o"))
    await store.commit_turn(lease, TurnCommit(
        parts=(TextPart(text="hello"),), provider_state=None, audit=None, usage=Usage(),
        context=None, strategy="replay", path=()))
    rebuilt = await synthesized_final(store, chat.id, "t1")
    assert isinstance(rebuilt, TurnCompleted)
    assert (rebuilt.finish_reason, rebuilt.finish_reason_raw, rebuilt.text) == (
        "stop", None, "hello")
