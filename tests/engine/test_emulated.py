"""TurnEngine against the five provider emulators over loopback HTTP.

After every turn of the durable-provider tests, DESIGN.md section 2 invariant 2 is
checked: the stored cursor's provider-side conversation (as the emulator reconstructs
it) equals the committed history.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest

from tests.engine.support import FakeClock, Outcome, collect, make_turn, tool
from turnstate.core import ContextSettings, parse_envelope
from turnstate.core._conversation import Role
from turnstate.core._events import TurnAborted
from turnstate.emulators import Fault
from turnstate.emulators._base import items_from_messages
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore, SqliteStore, Store

DURABLE = {"openai": "gpt-4o", "gemini": "gemini-2.5-flash"}
WEATHER = '[[call:weather {"city": "Paris"}]] weather please'


@attrs.define
class Live:
    stack: EmulatedProviders
    store: Store
    engine: TurnEngine
    clock: FakeClock
    chat_id: str

    async def turn(self, text: str, **kwargs: Any) -> Outcome:
        outcome = await collect(self.engine.run_turn(self.chat_id, make_turn(text, **kwargs)))
        await self.check_cursor_conversation()
        return outcome

    async def stored(self) -> str | None:
        return (await self.store.load_chat(self.chat_id)).last_provider_state

    async def check_cursor_conversation(self) -> None:
        """Invariant 2: the cursor stands for exactly the committed history."""
        raw = await self.stored()
        if raw is None:
            return
        envelope = parse_envelope(raw)
        emulator: Any = self.stack.emulators[envelope.provider]
        history = await self.store.load_history(self.chat_id)
        assert emulator.conversation_for(envelope.cursor) == items_from_messages(history)

    def requests(self, provider: str) -> list[Any]:
        return list(self.stack.emulators[provider].requests)


@pytest.fixture(params=["memory", "sqlite"])
async def live(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[Live]:
    clock = FakeClock()
    options = {"anthropic": {"thinking_budget_tokens": 1024}}
    async with EmulatedProviders(adapter_options=options) as stack, \
            AiohttpTransport() as transport:
        if request.param == "memory":
            store: Any = MemoryStore(clock=clock)
            yield await _live(stack, store, transport, clock)
        else:
            async with SqliteStore.open(tmp_path / "live.sqlite", clock=clock) as store:
                yield await _live(stack, store, transport, clock)


async def _live(stack: EmulatedProviders, store: Any, transport: Any, clock: FakeClock) -> Live:
    engine = TurnEngine(store, stack.adapters, transport, clock=clock)
    chat = await store.create_chat(owner="live")
    return Live(stack, store, engine, clock, chat.id)


# --- durable providers ---------------------------------------------------------------------


@pytest.mark.parametrize("provider", sorted(DURABLE))
async def test_cursor_continuation_and_tool_loop(live: Live, provider: str) -> None:
    """Replay first, then cursor turns; a tool loop chains on the newest response id."""
    model = DURABLE[provider]
    first = await live.turn("hello", provider=provider, model=model)
    second = await live.turn("more", provider=provider, model=model)
    tools = await live.turn(WEATHER, provider=provider, model=model)
    assert first.triggers[0] == "no_stored_state" and second.triggers[0] == "continue_with_cursor"
    assert tools.triggers == ["continue_with_cursor", "tool_calls", "tools_done", "completed",
                              "committed"]
    assert tools.final.stats.requests == 2
    cursor_requests = live.requests(provider)[-2:]
    assert all(_cursor_of(provider, r.json) for r in cursor_requests)
    assert "Paris" in tools.final.text or "weather" in tools.final.text


def _cursor_of(provider: str, body: dict[str, Any]) -> str | None:
    key = "previous_response_id" if provider == "openai" else "previous_interaction_id"
    return body.get(key)


@pytest.mark.parametrize("provider", sorted(DURABLE))
@pytest.mark.parametrize("change", ["model", "prompt", "tools", "provider", "expired",
                                    "malformed", "invalid"])
async def test_every_validation_reason_degrades_and_recovers(
    live: Live, provider: str, change: str
) -> None:
    """Each validation reason replays once, the commit stores a fresh cursor, and the next
    turn continues by cursor."""
    model = DURABLE[provider]
    base: dict[str, Any] = {"provider": provider, "model": model}
    await live.turn("start", **base)
    changed = dict(base)
    if change == "model":
        changed["model"] = {"openai": "gpt-4.1", "gemini": "gemini-2.5-pro"}[provider]
    elif change == "prompt":
        changed["prompt"] = "Different instructions."
    elif change == "tools":
        changed["tools"] = (tool("weather"),)
    elif change == "provider":
        other = "gemini" if provider == "openai" else "openai"
        changed = {"provider": other, "model": DURABLE[other]}
    elif change == "expired":
        live.clock.advance(days=400)
    else:
        await _corrupt(live, change)
    outcome = await live.turn("changed", **changed)
    reason = {"model": "model_changed", "prompt": "system_prompt_changed",
              "tools": "toolset_changed", "provider": "provider_changed",
              "expired": "cursor_expired", "malformed": "envelope_malformed",
              "invalid": "cursor_invalid"}[change]
    assert outcome.final.degradation == reason and outcome.states[1] == "replay"
    replayed = live.requests(changed["provider"])[-1].json
    assert _cursor_of(changed["provider"], replayed) is None
    after = await live.turn("again", **changed)
    assert after.triggers[0] == "continue_with_cursor"


async def _corrupt(live: Live, how: str) -> None:
    raw = json.loads(await live.stored() or "{}")
    if how == "malformed":
        raw["schemaVersion"] = "one"
    else:
        raw["coversSeq"] = 999
    text = json.dumps(raw)
    store: Any = live.store
    if isinstance(store, MemoryStore):
        store._chats[live.chat_id]["last_provider_state"] = text
    else:
        await store.fetch_raw("UPDATE chats SET last_provider_state = ? WHERE id = ?",
                              (text, live.chat_id))


@pytest.mark.parametrize("provider", sorted(DURABLE))
async def test_expiry_before_the_first_call_retries_once_by_replay(
    live: Live, provider: str
) -> None:
    """The provider lost the cursor: one replay retry in the same turn, a fresh cursor."""
    model = DURABLE[provider]
    await live.turn("one", provider=provider, model=model)
    old = parse_envelope(await live.stored()).cursor
    live.stack.chained(provider).expire(old)
    outcome = await live.turn("two", provider=provider, model=model)
    assert outcome.triggers == ["continue_with_cursor", "cursor_expired", "completed",
                                "committed"]
    assert outcome.final.stats.requests == 2  # a cursor loss costs at most one more
    assert parse_envelope(await live.stored()).cursor not in {None, old}


@pytest.mark.parametrize("provider", sorted(DURABLE))
async def test_expiry_after_tool_results_aborts_and_keeps_the_cursor(
    live: Live, provider: str
) -> None:
    """Results in flight when the cursor dies: tool_result_cursor_loss, old cursor kept."""
    model = DURABLE[provider]
    await live.turn("one", provider=provider, model=model)
    before = await live.stored()
    emulator: Any = live.stack.emulators[provider]

    async def evicting(_: dict[str, Any]) -> str:
        emulator.evict_all()
        return "22C"

    outcome = await live.turn(WEATHER, provider=provider, model=model,
                              tools=(tool("weather", evicting), tool("time")))
    assert outcome.final.degradation is None
    assert outcome.final.reason == "tool_result_cursor_loss"
    assert await live.stored() == before
    messages = await live.store.list_messages(live.chat_id)
    assert [m.status for m in messages[-2:]] == ["aborted", "aborted"]


@pytest.mark.parametrize("provider", sorted(DURABLE))
async def test_opted_in_recovery_replays_the_results_under_the_providers_rules(
    live: Live, provider: str
) -> None:
    """Cursor lost with results in flight, recovery on: one replay carrying the calls and
    results (no server item ids for OpenAI; Gemini signatures back to the same model),
    each tool runs once, and the new cursor stands for the committed history."""
    model = DURABLE[provider]
    await live.turn("one", provider=provider, model=model)
    emulator: Any = live.stack.emulators[provider]
    runs: list[str] = []

    async def evicting(args: dict[str, Any]) -> str:
        runs.append(args["city"])
        emulator.evict_all()
        return "22C"

    outcome = await live.turn("[[think]] " + WEATHER, provider=provider, model=model,
                              tools=(tool("weather", evicting), tool("time")),
                              recover_tool_results=True)
    assert outcome.triggers == ["continue_with_cursor", "tool_calls", "tools_done",
                                "tool_result_cursor_loss", "completed", "committed"]
    assert runs == ["Paris"] and outcome.final.stats.requests == 3
    assert outcome.final.degradation == "tool_result_cursor_loss"
    replay = live.requests(provider)[-1].json
    assert _cursor_of(provider, replay) is None
    kinds = [item.get("type") for item in replay["input"]]
    if provider == "openai":
        assert kinds[-2:] == ["function_call", "function_call_output"]
        assert all("id" not in item for item in replay["input"])
    else:
        assert kinds[-2:] == ["function_call", "function_result"]
        assert replay["input"][-2].get("signature")  # issued by this model, sent back
    assert "22C" in outcome.final.text
    assert (await live.turn("next", provider=provider, model=model)).triggers[0] == \
        "continue_with_cursor"


async def test_compaction_on_and_off(live: Live) -> None:
    """context_management is sent by default and absent when disabled."""
    await live.turn("a", provider="openai", model="gpt-4o")
    await live.turn("b", provider="openai", model="gpt-4o",
                    context=ContextSettings(provider_compaction_enabled=False))
    on, off = (r.json for r in live.requests("openai")[-2:])
    assert on["context_management"][0]["type"] == "compaction"
    assert "context_management" not in off


async def test_compaction_happens_below_a_tiny_threshold(live: Live) -> None:
    """With a tiny threshold the emulator compacts, and the chain still continues."""
    settings = ContextSettings(compact_threshold=10)
    for text in ("one", "two", "three"):
        outcome = await live.turn(text, provider="openai", model="gpt-4o", context=settings)
        assert outcome.committed
    assert outcome.triggers[0] == "continue_with_cursor"


async def test_transient_error_is_retried_by_the_transport(live: Live) -> None:
    """A 500 before any output is retried; the turn still makes one logical call."""
    live.stack.emulators["openai"].faults.push(
        Fault(status=500, body={"error": {"message": "boom", "type": "server_error",
                                          "code": "server_error", "param": None}}))
    live.engine.transport.retry = attrs.evolve(live.engine.transport.retry,  # type: ignore[attr-defined]
                                               base_delay=0.0, max_delay=0.0)
    outcome = await live.turn("x", provider="openai", model="gpt-4o")
    assert outcome.committed and len(live.requests("openai")) == 2


async def test_malformed_frame_fails_the_turn_cleanly(live: Live) -> None:
    """A frame that is not JSON aborts with provider_failed; nothing is committed."""
    live.stack.emulators["gemini"].faults.push(Fault(malformed_after=2))
    outcome = await live.turn("x", provider="gemini", model="gemini-2.5-flash")
    assert outcome.final.reason == "provider_failed" and await live.stored() is None


# --- stateless providers -------------------------------------------------------------------

STATELESS = {"openai-compatible": "gpt-4o-mini", "deepseek": "deepseek-chat",
             "anthropic": "claude-sonnet-4-5"}


@pytest.mark.parametrize("provider", sorted(STATELESS))
async def test_stateless_turns_replay_from_zero(live: Live, provider: str) -> None:
    """Every turn sends the whole history; tool loops run locally; nothing is stored."""
    model = STATELESS[provider]
    await live.turn("first", provider=provider, model=model)
    outcome = await live.turn(WEATHER, provider=provider, model=model)
    assert outcome.triggers == ["no_stored_state", "tool_calls", "tools_done", "completed",
                                "committed"]
    assert await live.stored() is None
    last = live.requests(provider)[-1].json
    texts = json.dumps(last["messages"])
    assert "first" in texts and "weather please" in texts


@pytest.mark.parametrize("provider", sorted(STATELESS))
async def test_switch_from_durable_clears_the_cursor(live: Live, provider: str) -> None:
    """A durable cursor, then a stateless provider: provider_changed, cursor cleared."""
    await live.turn("durable", provider="openai", model="gpt-4o")
    outcome = await live.turn("stateless", provider=provider, model=STATELESS[provider])
    assert outcome.final.degradation == "provider_changed"
    assert outcome.states[1] == "local_loop" and await live.stored() is None


@pytest.mark.parametrize("model", ["deepseek-v4-flash", "deepseek-reasoner"])
async def test_deepseek_thinking_tool_loop(live: Live, model: str) -> None:
    """A thinking tool loop passes the emulator's reasoning_content rules; the next user
    turn replays tool-turn reasoning (V4 rules: deepseek-reasoner is an alias of
    deepseek-v4-flash, and its responses name that model)."""
    text = '[[think]] [[call:weather {"city": "Rome"}]] [[rounds:2]] go'
    outcome = await live.turn(text, provider="deepseek", model=model)
    assert outcome.committed, outcome.final
    assert outcome.of_type("reasoning_delta")
    nxt = await live.turn("[[think]] and then?", provider="deepseek", model=model)
    assert nxt.committed, nxt.final
    body = live.requests("deepseek")[-1].json
    history = [m for m in body["messages"] if m["role"] == "assistant"]
    carried = [m.get("reasoning_content") for m in history if m.get("tool_calls")]
    assert carried and all(carried)
    assert nxt.final.stats.usage.cache_hit_tokens


async def test_anthropic_thinking_blocks_go_back_unchanged(live: Live) -> None:
    """The emulator verifies the signed thinking blocks within the tool loop."""
    outcome = await live.turn('[[think]] [[call:weather {"city": "Oslo"}]] go',
                              provider="anthropic", model="claude-sonnet-4-5")
    assert outcome.committed, outcome.final
    loop_request = live.requests("anthropic")[-1].json
    assistant = [m for m in loop_request["messages"] if m["role"] == "assistant"][-1]
    assert assistant["content"][0]["type"] == "thinking"


# --- a 2xx answer that is no event stream (json2xx) ----------------------------------------


async def test_a_retryable_error_sent_with_200_is_retried(live: Live) -> None:
    """Anthropic's overloaded error as a ``200 application/json`` body is the provider's
    transient error, retried before any output: the turn commits."""
    live.stack.emulators["anthropic"].faults.push(
        Fault(status=200, body={"type": "error", "error": {"type": "overloaded_error",
                                                           "message": "Overloaded"}}))
    live.engine.transport.retry = attrs.evolve(live.engine.transport.retry,  # type: ignore[attr-defined]
                                               base_delay=0.0, max_delay=0.0)
    outcome = await live.turn("x", provider="anthropic", model="claude-sonnet-4-5")
    assert outcome.committed and len(live.requests("anthropic")) == 2


async def test_a_fatal_error_sent_with_200_keeps_the_providers_message(live: Live) -> None:
    """A gateway's fatal error with 200 aborts the turn with the provider's own message
    and code, not a generic end-of-stream error; nothing is committed."""
    live.stack.emulators["gemini"].faults.push(
        Fault(status=200, body={"error": {"code": 403, "message": "Quota project denied",
                                          "status": "PERMISSION_DENIED"}}))
    outcome = await live.turn("x", provider="gemini", model="gemini-2.5-flash")
    final = outcome.final
    assert final.reason == "provider_failed" and len(live.requests("gemini")) == 1
    assert isinstance(final, TurnAborted) and final.failure is not None
    assert "Quota project denied" in (final.detail or "")
    assert await live.stored() is None


async def test_a_non_streamed_completion_fails_the_turn_cleanly(live: Live) -> None:
    """A plain JSON completion (a proxy dropped ``stream: true``) aborts the turn with an
    error naming the content type: no text streamed, nothing committed, no retry."""
    completion = {"id": "chatcmpl-1", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hello there"},
         "finish_reason": "stop"}]}
    live.stack.emulators["openai-compatible"].faults.push(Fault(status=200, body=completion))
    before = len(await live.store.load_history(live.chat_id))
    outcome = await live.turn("x", provider="openai-compatible", model="gpt-4o-mini")
    assert outcome.final.reason == "provider_failed"
    assert "application/json" in (outcome.final.detail or "")
    assert not outcome.of_type("text_delta")
    assert len(live.requests("openai-compatible")) == 1
    history = await live.store.load_history(live.chat_id)
    assert all(message.role is not Role.ASSISTANT for message in history[before:])
