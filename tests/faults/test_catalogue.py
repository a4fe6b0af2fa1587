"""The fault catalogue of issue 12, against all five providers through the emulators.

Each case injects one hostile behaviour into a chat that already has a committed turn,
then asserts the declared outcome and reason, that the lease is free, that no message
is left ``in_progress``, and that no committed data changed (the history, the stored
cursor, the chat's version) unless the declared outcome is a commit. No case waits for
real: retries use a recording sleep, and a stall meets a 0.2 s idle timeout.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import aclosing
from typing import Any

import attrs
import pytest

from tests.engine.support import make_turn, tool
from tests.faults.catalogue import (
    GARBAGE_FRAME,
    HTML_PAGE,
    MODELS,
    PROVIDERS,
    stream_error,
)
from tests.faults.rig import FaultRig, fault_rig, quick_transport
from turnstate.core import InvalidInput
from turnstate.emulators import Fault
from turnstate.engine import TurnEngine
from turnstate.providers import RetryPolicy


@attrs.frozen
class Case:
    fault: Fault | None
    outcome: str  # "committed", or the abort reason
    detail: str = ""  # a word the abort detail must contain
    retry: bool = False  # the transport may retry once (with a recording sleep)


CASES = {
    "html_in_a_200": Case(Fault(status=200, body=HTML_PAGE.replace("MSG", "oops"),
                                content_type="text/html"), "provider_failed"),
    "no_terminal_event": Case(Fault(frame_after=2, frame=""), "provider_failed"),
    "stall": Case(Fault(stall_after=1), "provider_failed", "idle timeout"),
    "garbage_json": Case(Fault(frame_after=1, frame=GARBAGE_FRAME.replace("MSG", "x")),
                         "provider_failed"),
    "connection_reset": Case(Fault(cut_after=2), "provider_failed", "lost"),
    "rate_limited_then_ok": Case(Fault.rate_limited(retry_after=7), "committed", retry=True),
    "http_500": Case(Fault(status=500, body={"error": {"message": "boom"}}),
                     "provider_failed"),
    "echoed_key_in_stream": Case(Fault(frame_after=1, echo_credentials=True,
                                       frame="$CREDENTIALS"), "provider_failed"),
}


@pytest.fixture(scope="module")
def rig() -> Iterator[FaultRig]:
    with fault_rig() as made:
        yield made


async def committed_state(rig: FaultRig, chat_id: str) -> Any:
    chat = await rig.store.load_chat(chat_id)
    history = await rig.store.load_history(chat_id)
    return chat.last_provider_state, chat.version, history


async def settle(rig: FaultRig, chat_id: str) -> None:
    chat = await rig.store.load_chat(chat_id)
    assert chat.active_turn_id is None, "the lease is still held"
    statuses = [m.status.value for m in await rig.store.list_messages(chat_id)]
    assert "in_progress" not in statuses


def engine_for(rig: FaultRig, provider: str, transport: Any) -> TurnEngine:
    return TurnEngine(rig.store, rig.stack.adapters, transport, clock=rig.clock)


async def warm_chat(rig: FaultRig, provider: str) -> str:
    chat = await rig.store.create_chat(owner="faults")
    async with quick_transport() as transport:
        events = [e async for e in engine_for(rig, provider, transport).run_turn(
            chat.id, make_turn("warm", provider=provider, model=MODELS[provider]))]
    assert events[-1].type == "turn_completed", events[-1]
    return chat.id


def with_provider_frames(case: Case, provider: str) -> Fault | None:
    fault = case.fault
    if fault is not None and fault.frame == "$CREDENTIALS":
        return attrs.evolve(fault, frame=stream_error(provider, "key $CREDENTIALS"))
    return fault


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_fault(rig: FaultRig, provider: str, name: str) -> None:
    case = CASES[name]
    rig.run(_fault(rig, provider, case))


async def _fault(rig: FaultRig, provider: str, case: Case) -> None:
    chat_id = await warm_chat(rig, provider)
    before = await committed_state(rig, chat_id)
    fault = with_provider_frames(case, provider)
    if fault is not None:
        rig.stack.emulators[provider].faults.push(fault)
    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)

    retry = RetryPolicy(max_attempts=2 if case.retry else 1)
    async with quick_transport(idle_timeout=0.2, retry=retry) as transport:
        transport._sleep = sleep  # a recording sleep: no real wait
        events = [e async for e in engine_for(rig, provider, transport).run_turn(
            chat_id, make_turn("go", provider=provider, model=MODELS[provider]))]
    final = events[-1]
    await settle(rig, chat_id)
    rig.stack.emulators[provider].faults.clear()
    if case.outcome == "committed":
        assert final.type == "turn_completed", final
        assert slept == [7.0]  # Retry-After honoured, without waiting for it
        return
    assert final.type == "turn_aborted" and final.reason == case.outcome, final
    assert case.detail in (final.detail or ""), final.detail
    assert "emulator-key" not in (final.detail or "")
    assert await committed_state(rig, chat_id) == before


@pytest.mark.parametrize("provider", PROVIDERS)
def test_in_stream_overloaded_before_output_is_retried(rig: FaultRig, provider: str) -> None:
    """An overloaded error inside a 200 stream after its first event (``message_start``,
    ``response.created``, ``interaction.created``, a role-only chunk), before any
    output: transient, and nothing was shown, so the call is sent again and the turn
    commits (issue 24, item 7; after output it is not retried: test_wire_fidelity)."""
    async def run() -> None:
        chat_id = await warm_chat(rig, provider)
        rig.stack.emulators[provider].faults.push(
            Fault(frame_after=1, frame=stream_error(provider, "Overloaded", overloaded=True)))
        slept: list[float] = []

        async def sleep(delay: float) -> None:
            slept.append(delay)

        async with quick_transport(retry=RetryPolicy(max_attempts=3)) as transport:
            transport._sleep = sleep  # a recording sleep: no real wait
            events = [e async for e in engine_for(rig, provider, transport).run_turn(
                chat_id, make_turn("go", provider=provider, model=MODELS[provider]))]
        final = events[-1]
        assert final.type == "turn_completed", final
        assert len(slept) == 1
        await settle(rig, chat_id)

    rig.run(run())


@pytest.mark.parametrize("provider", PROVIDERS)
def test_consumer_leaves_mid_stream(rig: FaultRig, provider: str) -> None:
    """Defect 1: the consumer closes the stream at its first delta."""
    async def run() -> None:
        chat_id = await warm_chat(rig, provider)
        before = await committed_state(rig, chat_id)
        async with quick_transport() as transport:
            stream = engine_for(rig, provider, transport).run_turn(
                chat_id, make_turn("go", provider=provider, model=MODELS[provider]))
            async with aclosing(stream) as events:
                async for item in events:
                    if item.type == "text_delta":
                        break
        await settle(rig, chat_id)
        turn = (await rig.store.list_turns(chat_id, limit=1))[0]
        assert turn.reason == "cancelled"
        assert await committed_state(rig, chat_id) == before

    rig.run(run())


@pytest.mark.parametrize("provider", PROVIDERS)
def test_bad_input_takes_no_lease(rig: FaultRig, provider: str) -> None:
    """Defect 4: a lone surrogate in the user's text is refused before the chat is
    touched; one in a tool's output is repaired and the turn commits."""
    async def odd(_: dict[str, Any]) -> Any:
        return "bad \udc80 output"

    async def run() -> None:
        chat_id = await warm_chat(rig, provider)
        before = await committed_state(rig, chat_id)
        requests = len(rig.stack.emulators[provider].requests)
        async with quick_transport() as transport:
            engine = engine_for(rig, provider, transport)
            with pytest.raises(InvalidInput):
                await anext(engine.run_turn(chat_id, make_turn(
                    "bad \ud800", provider=provider, model=MODELS[provider])))
            assert await committed_state(rig, chat_id) == before
            assert len(rig.stack.emulators[provider].requests) == requests
            events = [e async for e in engine.run_turn(chat_id, make_turn(
                '[[call:odd {"city": "x"}]] go', provider=provider, model=MODELS[provider],
                tools=(tool("odd", odd),)))]
        assert events[-1].type == "turn_completed", events[-1]
        [result] = [e for e in events if e.type == "tool_result"]
        assert "\ufffd" in result.output and "U+FFFD" in result.output
        await settle(rig, chat_id)

    rig.run(run())
