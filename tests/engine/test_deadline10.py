"""A turn has a bounded life (deadline10): past ``TurnLimits.turn_seconds`` (or the turn's
``TurnInput.deadline_seconds``) it ends ``aborted`` with reason ``deadline_exceeded``,
wherever it is: the provider's head, its stream, a tool, a retry's wait, a detached turn.
Before, nothing bounded a turn but its calls' own limits (3 attempts of up to 10 min per
call, per tool iteration, plus retry waits and tool handlers): hours, lease and client
held all along.

The emulators' faults hold the provider on an event nobody sets (the head) or stall its
stream; the deadlines are tenths of a second: each turn ends by its deadline's timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.engine.support import Env, forever, make_turn, tool
from turnstate.core import TurnAborted, TurnCompleted, TurnEvent
from turnstate.core._errors import ConfigurationError, InvalidInput, TurnDeadlineExceeded
from turnstate.emulators import EmulatedProviders
from turnstate.emulators._base import Fault
from turnstate.emulators._scripted import ScriptStep
from turnstate.engine import TurnEngine, TurnInput, TurnLimits
from turnstate.engine._limits import DEFAULT_TURN_SECONDS
from turnstate.providers import AiohttpTransport
from turnstate.storage import MemoryStore, TurnStatus
from turnstate.testing import emulated_providers, turn_events

__all__ = ["emulated_providers"]  # the fixture, imported for pytest

SHORT = 0.3  # seconds: every turn below would wait for ever without its deadline


def ask(provider: str = "openai", model: str = "gpt-4o", user_text: str = "hi",
        **kwargs: object) -> TurnInput:
    return TurnInput(provider=provider, model=model, system_prompt="s", user_text=user_text,
                     **kwargs)  # type: ignore[arg-type]


@pytest.fixture
async def sleeps() -> list[float]:
    return []


@pytest.fixture
async def engine(emulated_providers: EmulatedProviders,
                 sleeps: list[float]) -> AsyncIterator[TurnEngine]:
    """An engine whose turns may run ``SHORT`` seconds; its transport records the waits
    between retries instead of sleeping them."""
    async def recorded(seconds: float) -> None:
        sleeps.append(seconds)

    async with AiohttpTransport(sleep=recorded) as transport, \
            TurnEngine(MemoryStore(), emulated_providers.adapters, transport,
                       limits=TurnLimits(turn_seconds=SHORT)) as built:
        yield built


async def _aborted(engine: TurnEngine, chat_id: str, events: list[TurnEvent]) -> TurnAborted:
    """The turn's final event, checked: ``deadline_exceeded``, recorded so, chat free."""
    final = events[-1]
    assert isinstance(final, TurnAborted) and final.reason == "deadline_exceeded", final
    assert final.path[-2].trigger == "deadline_exceeded"
    record = await engine.store.load_turn(final.turn_id)
    assert (record.status, record.reason) == (TurnStatus.ABORTED, "deadline_exceeded")
    assert (await engine.store.load_chat(chat_id)).active_turn_id is None
    return final


async def test_a_provider_head_that_never_comes_is_cut_at_the_deadline(
        engine: TurnEngine, emulated_providers: EmulatedProviders) -> None:
    gate = asyncio.Event()  # the emulator answers only once it is set: never, here
    emulated_providers.emulators["openai"].faults.push(Fault(gate=gate))
    chat = await engine.store.create_chat(owner="o")
    final = await _aborted(engine, chat.id, await turn_events(engine.run_turn(chat.id, ask())))
    assert final.path[-2].source == "replay"
    assert final.detail is not None and "deadline of 0.3s" in final.detail
    # the request in flight was sent and cut: billed by an amount nobody knows
    assert final.stats.requests == 1 and final.stats.cost is None
    answer = (await engine.store.list_messages(chat.id))[-1]
    assert answer.status == "aborted" and answer.provider_state is not None  # its audit
    gate.set()
    # the engine's default applies to the next turn; the turn's own override wins
    events = await turn_events(engine.run_turn(chat.id, ask(deadline_seconds=60.0)))
    assert isinstance(events[-1], TurnCompleted)


async def test_a_stream_that_stalls_is_cut_and_its_bill_kept(
        engine: TurnEngine, emulated_providers: EmulatedProviders) -> None:
    """Anthropic's ``message_start`` says the request's input: the stalled request's
    usage is the aborted answer's, its text what streamed."""
    emulated_providers.emulators["anthropic"].faults.push(Fault(stall_after=4))
    chat = await engine.store.create_chat(owner="o")
    events = await turn_events(engine.run_turn(
        chat.id, ask("anthropic", "claude-sonnet-4-5", user_text="tell me a long story")))
    final = await _aborted(engine, chat.id, events)
    assert final.path[-2].source == "local_loop"
    assert final.stats.requests == 1 and final.stats.usage.input_tokens > 0
    answer = (await engine.store.list_messages(chat.id))[-1]
    assert answer.usage is not None and answer.usage.input_tokens > 0
    streamed = "".join(e.text for e in events if e.type == "text_delta")
    assert "".join(getattr(p, "text", "") for p in answer.parts) == streamed


async def test_a_retry_whose_wait_ends_past_the_deadline_is_not_attempted(
        engine: TurnEngine, emulated_providers: EmulatedProviders,
        sleeps: list[float]) -> None:
    """A 429 asking 30 s of a turn with 0.3 s left: no wait, no second request; the turn
    ends at once, the provider's failure beside the reason."""
    emulator = emulated_providers.emulators["openai"]
    emulator.faults.push(Fault.rate_limited(retry_after=30))
    chat = await engine.store.create_chat(owner="o")
    final = await _aborted(engine, chat.id, await turn_events(engine.run_turn(chat.id, ask())))
    assert sleeps == [] and len(emulator.requests) == 1 and final.stats.requests == 1
    assert final.failure is not None and final.failure.retryable
    assert final.detail is not None and "retry" in final.detail
    # a wait that ends before the deadline is waited and the retry sent
    emulator.faults.push(Fault.rate_limited(retry_after=0.01))
    events = await turn_events(engine.run_turn(chat.id, ask()))
    assert isinstance(events[-1], TurnCompleted) and sleeps == [0.01]


async def test_a_detached_turn_past_its_deadline_ends_for_its_followers(
        engine: TurnEngine, emulated_providers: EmulatedProviders) -> None:
    emulated_providers.emulators["openai"].faults.push(Fault(stall_after=6))
    chat = await engine.store.create_chat(owner="o")
    live = await engine.start_turn(chat.id, ask(user_text="a long answer"))
    following = await engine.follow(chat.id, live.turn_id)
    seen = [entry async for entry in following.events]
    assert seen[-1].type == "turn_aborted" and '"reason":"deadline_exceeded"' in seen[-1].data
    record = await engine.store.load_turn(live.turn_id)
    assert (record.status, record.reason) == (TurnStatus.ABORTED, "deadline_exceeded")
    assert (await engine.store.load_chat(chat.id)).active_turn_id is None


async def test_a_tool_past_the_deadline_is_cancelled_and_the_answered_call_billed(
        env: Env) -> None:
    cancelled = asyncio.Event()

    async def stuck(args: dict[str, object]) -> object:
        try:
            return await forever(args)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    env.backend.push("openai", ScriptStep.call(("stuck", {"city": "x"})))
    outcome = await env.turn("t", tools=(tool("stuck", stuck),), deadline_seconds=SHORT)
    final = outcome.final
    assert isinstance(final, TurnAborted) and final.reason == "deadline_exceeded"
    assert final.path[-2].source == "tool_iteration" and cancelled.is_set()
    assert final.stats.requests == 1 and final.stats.usage.input_tokens > 0
    answer = (await env.store.list_messages(env.chat_id))[-1]
    assert answer.usage == final.stats.usage  # the answered call's bill is kept
    assert (await env.store.load_chat(env.chat_id)).active_turn_id is None


def test_the_deadline_settings_are_checked() -> None:
    assert TurnLimits().turn_seconds == DEFAULT_TURN_SECONDS == 1800.0
    assert TurnLimits(turn_seconds=float("inf")).turn_seconds == float("inf")
    for bad in (0, -1.0, float("nan"), True, "60"):
        with pytest.raises(ConfigurationError, match="turn_seconds"):
            TurnLimits(turn_seconds=bad)  # type: ignore[arg-type]


async def test_a_turn_deadline_that_is_not_a_positive_number_is_refused(env: Env) -> None:
    for bad in (0, -5, float("nan"), True, "60"):
        with pytest.raises(InvalidInput, match="deadline_seconds"):
            await env.turn("x", deadline_seconds=bad)
    assert env.backend.requests == []


def test_the_error_names_the_deadline() -> None:
    error = TurnDeadlineExceeded(1.5, "in flight")
    assert error.error_code == "turn_deadline_exceeded" and error.seconds == 1.5
    assert str(error) == "the turn ran past its deadline of 1.5s (in flight)"


async def test_a_turn_within_its_deadline_arms_no_timer_before_its_first_beat(
        env: Env) -> None:
    """The default deadline (30 min) is armed by the heartbeat's first beat: a turn
    shorter than the beat interval (a cursor turn) pays no timer for it."""
    loop = asyncio.get_running_loop()
    armed: list[float] = []
    call_at = loop.call_at

    def spy(when: float, callback: object, *args: object, **kwargs: object) -> object:
        armed.append(when)
        return call_at(when, callback, *args, **kwargs)  # type: ignore[arg-type]

    loop.call_at = spy  # type: ignore[method-assign]
    try:
        assert (await env.turn("a")).committed
    finally:
        del loop.call_at
    assert all(when < loop.time() + 60 for when in armed)  # none at 30 min from now
    assert make_turn("x").deadline_seconds is None
