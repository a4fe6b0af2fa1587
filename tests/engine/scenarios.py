"""Engine scenarios: each drives real turns through TurnEngine and asserts what happened.

Every scenario is registered in ``SCENARIOS``; ``test_scenarios.py`` runs each one as a
test, and ``test_edge_coverage.py`` runs them all and checks that together they take
every edge of ``TRANSITIONS`` (so a new edge without a scenario fails the suite).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from contextlib import aclosing, suppress
from typing import Any

import attrs
import pytest

from tests.engine.support import Env, Outcome, collect, forever, make_turn, tool
from turnstate.core import TextPart, TransitionPart, parse_envelope, serialize_envelope
from turnstate.core._errors import ChatBusy, StorageError
from turnstate.core._events import TurnEvent
from turnstate.emulators._scripted import ScriptStep
from turnstate.states import PathStep
from turnstate.storage import TurnStatus

Scenario = Callable[[Env], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {}
EXTRA_PATHS: dict[int, list[tuple[PathStep, ...]]] = {}


def scenario(fn: Scenario) -> Scenario:
    SCENARIOS[fn.__name__] = fn
    return fn


def note_path(env: Env, path: tuple[PathStep, ...]) -> None:
    EXTRA_PATHS.setdefault(id(env), []).append(path)


async def stored_envelope(env: Env) -> str | None:
    return (await env.store.load_chat(env.chat_id)).last_provider_state


async def set_raw_state(env: Env, value: str | None) -> None:
    """Write ``chats.last_provider_state`` behind the engine's back (a corrupt row)."""
    store: Any = env.store
    if hasattr(store, "_chats"):
        store._chats[env.chat_id]["last_provider_state"] = value
        return
    await store.fetch_raw("UPDATE chats SET last_provider_state = ? WHERE id = ?",
                          (value, env.chat_id))


def assert_committed(outcome: Outcome) -> None:
    assert outcome.committed, outcome.final


# --- happy paths -------------------------------------------------------------------------


@scenario
async def durable_first_turn_replays(env: Env) -> None:
    """With nothing stored, a durable provider replays and the commit stores a cursor."""
    outcome = await env.turn("hi")
    assert outcome.triggers == ["no_stored_state", "completed", "committed"]
    assert outcome.states == ["validate", "replay", "persist", "done"]
    envelope = parse_envelope(await stored_envelope(env))
    assert envelope.cursor is not None and envelope.cursor.startswith("scr_")
    assert envelope.provider == "openai" and envelope.mode == "responses"
    assert envelope.covers_seq == (await env.store.load_history(env.chat_id))[-1].seq
    assert [e.type for e in outcome.events][-3:] == ["context_snapshot", "state_changed",
                                                     "turn_completed"]
    assert outcome.final.text == "ok"


@scenario
async def cursor_continuation(env: Env) -> None:
    """The next turn continues by cursor and sends no history."""
    first = await env.turn("one")
    cursor = parse_envelope(await stored_envelope(env)).cursor
    second = await env.turn("two")
    assert first.committed and second.triggers == ["continue_with_cursor", "completed",
                                                   "committed"]
    body = env.backend.requests[-1].body
    assert body["cursor"] == cursor and body["history"] == [] and body["user"] == "two"
    assert parse_envelope(await stored_envelope(env)).cursor != cursor


@scenario
async def durable_tool_loop_chained_by_cursor(env: Env) -> None:
    """Tool iterations chain on the newest response id and send only the results."""
    await env.turn("one")
    env.backend.push("openai", ScriptStep.call(("weather", {"city": "Paris"}),
                                               ("time", {"city": "Oslo"})),
                     ScriptStep.reply("sunny"))
    outcome = await env.turn("weather?")
    assert outcome.triggers == ["continue_with_cursor", "tool_calls", "tools_done",
                                "completed", "committed"]
    calls, follow = env.backend.requests[-2].body, env.backend.requests[-1].body
    assert follow["iteration"] == 1 and follow["cursor"] != calls["cursor"]
    assert [r["name"] for r in follow["toolResults"]] == ["weather", "time"]
    assert outcome.final.stats.requests == 2 and outcome.final.stats.tool_calls == 2
    types = [e.type for e in outcome.events]
    assert types.index("tool_call") < types.index("tool_result")
    history = await env.store.load_history(env.chat_id)
    assert [type(p).__name__ for p in history[-1].parts] == [
        "ToolCallPart", "ToolCallPart", "ToolResultPart", "ToolResultPart", "TextPart"]


@scenario
async def stateless_local_loop(env: Env) -> None:
    """A stateless provider runs a local loop; nothing is stored as provider state."""
    env.backend.push("anthropic", ScriptStep.call(("weather", {"city": "Rome"})),
                     ScriptStep.reply("done"))
    outcome = await env.turn("w?", provider="anthropic", model="claude-sonnet-4-5")
    assert outcome.triggers == ["no_stored_state", "tool_calls", "tools_done", "completed",
                                "committed"]
    assert await stored_envelope(env) is None
    loop = env.backend.requests[-1].body["loop"]
    assert [m["role"] for m in loop] == ["assistant", "tool"]


# --- degradation at validation ---------------------------------------------------------


async def _degrades(env: Env, reason: str, **turn: Any) -> Outcome:
    outcome = await env.turn("again", **turn)
    assert_committed(outcome)
    assert outcome.final.degradation == reason
    degraded = outcome.of_type("continuation_degraded")
    notices = outcome.of_type("fallback_notice")
    assert [d.reason for d in degraded] == [reason] and [n.reason for n in notices] == [reason]
    types = [e.type for e in outcome.events]
    assert types[:3] == ["continuation_degraded", "fallback_notice", "state_changed"]
    parts = (await env.store.load_history(env.chat_id))[-1].parts
    transitions = [p for p in parts if isinstance(p, TransitionPart)]
    assert [(t.reason, t.recovered) for t in transitions] == [(reason, True)]
    return outcome


async def _recovers(env: Env, **turn: Any) -> None:
    after = await env.turn("recovered?", **turn)
    assert after.triggers[0] == "continue_with_cursor", after.triggers


@scenario
async def model_change_degrades_and_recovers(env: Env) -> None:
    """A new model replays once (model_changed), then continues by cursor."""
    await env.turn("one")
    outcome = await _degrades(env, "model_changed", model="gpt-4.1")
    assert outcome.triggers[0] == "model_changed" and outcome.states[1] == "replay"
    await _recovers(env, model="gpt-4.1")


@scenario
async def system_prompt_change_degrades(env: Env) -> None:
    """A new system prompt is system_prompt_changed."""
    await env.turn("one")
    await _degrades(env, "system_prompt_changed", prompt="Be verbose.")
    await _recovers(env, prompt="Be verbose.")


@scenario
async def toolset_change_degrades(env: Env) -> None:
    """Adding a tool is toolset_changed; reordering tools is not."""
    await env.turn("one", tools=(tool("a"), tool("b")))
    same = await env.turn("two", tools=(tool("b"), tool("a")))
    assert same.triggers[0] == "continue_with_cursor"
    await _degrades(env, "toolset_changed", tools=(tool("a"), tool("b"), tool("c")))


@scenario
async def provider_change_to_durable_replays(env: Env) -> None:
    """OpenAI → Gemini is provider_changed, replayed, and the Gemini cursor is stored."""
    await env.turn("one")
    await _degrades(env, "provider_changed", provider="gemini", model="gemini-2.5-flash")
    assert parse_envelope(await stored_envelope(env)).provider == "gemini"
    await _recovers(env, provider="gemini", model="gemini-2.5-flash")


@scenario
async def provider_change_to_stateless_clears_cursor(env: Env) -> None:
    """OpenAI → Anthropic is provider_changed into a local loop, and the cursor is cleared."""
    await env.turn("one")
    outcome = await _degrades(env, "provider_changed", provider="anthropic",
                              model="claude-sonnet-4-5")
    assert outcome.states[1] == "local_loop" and await stored_envelope(env) is None


@scenario
async def cursor_expiry_by_age(env: Env) -> None:
    """A cursor older than the provider's retention (30 days for OpenAI) is not used."""
    await env.turn("one")
    env.clock.advance(days=31)
    await _degrades(env, "cursor_expired")
    await _recovers(env)


@scenario
async def cursor_invalid_when_blank(env: Env) -> None:
    """A stored envelope with a blank cursor is cursor_invalid."""
    await env.turn("one")
    envelope = parse_envelope(await stored_envelope(env))
    await set_raw_state(env, serialize_envelope(envelope.__class__(
        **{**_fields(envelope), "cursor": "  "})))
    await _degrades(env, "cursor_invalid")


@scenario
async def malformed_envelope_degrades_durable(env: Env) -> None:
    """Garbage in the chat row is envelope_malformed and is cleared at once."""
    await env.turn("one")
    await set_raw_state(env, '{"schemaVersion": 99}')
    await _degrades(env, "envelope_malformed")
    await _recovers(env)


@scenario
async def malformed_envelope_degrades_stateless(env: Env) -> None:
    """A stateless provider facing garbage degrades into its local loop."""
    await set_raw_state(env, "not json at all")
    outcome = await _degrades(env, "envelope_malformed", provider="deepseek",
                              model="deepseek-chat")
    assert outcome.states[1] == "local_loop" and await stored_envelope(env) is None


def _fields(envelope: Any) -> dict[str, Any]:
    import attrs

    return attrs.asdict(envelope, recurse=False)


# --- cursor loss reported by the provider ------------------------------------------------


async def _rejected_then_replayed(env: Env, reason: str) -> None:
    await env.turn("one")
    env.backend.push("openai", ScriptStep.reject_cursor(reason), ScriptStep.reply("fine"))
    outcome = await env.turn("two")
    assert outcome.triggers == ["continue_with_cursor", reason, "completed", "committed"]
    assert outcome.final.strategy == "replay" and outcome.final.stats.requests == 2
    replay = env.backend.requests[-1].body
    assert replay["cursor"] is None and [i["text"] for i in replay["history"]] == ["one", "ok"]
    parts = (await env.store.load_history(env.chat_id))[-1].parts
    assert [(p.reason, p.source_state, p.recovered) for p in parts
            if isinstance(p, TransitionPart)] == [(reason, "cursor", True)]


@scenario
async def provider_reports_cursor_expired(env: Env) -> None:
    """A cursor the provider no longer has: one replay retry, then commit."""
    await _rejected_then_replayed(env, "cursor_expired")


@scenario
async def provider_reports_cursor_invalid(env: Env) -> None:
    """A cursor the provider calls invalid: one replay retry, then commit."""
    await _rejected_then_replayed(env, "cursor_invalid")


@scenario
async def cursor_loss_with_tool_results_aborts(env: Env) -> None:
    """Cursor lost after tools ran: abort with tool_result_cursor_loss, keep the old cursor."""
    await env.turn("one")
    before = await stored_envelope(env)
    env.backend.push("openai", ScriptStep.call(("weather", {"city": "Paris"})),
                     ScriptStep.reject_cursor("cursor_expired"))
    outcome = await env.turn("two")
    assert outcome.triggers == ["continue_with_cursor", "tool_calls", "tools_done",
                                "tool_result_cursor_loss", "abort_recorded"]
    assert outcome.final.reason == "tool_result_cursor_loss"
    assert await stored_envelope(env) == before
    messages = await env.store.list_messages(env.chat_id)
    assert [m.status for m in messages[-2:]] == ["aborted", "aborted"]
    assert any(type(p).__name__ == "ToolResultPart" for p in messages[-1].parts)


# --- failures ----------------------------------------------------------------------------


@scenario
async def provider_failures_abort_every_call_state(env: Env) -> None:
    """A provider error aborts from replay, cursor and local_loop; the cursor survives."""
    env.backend.push("openai", ScriptStep.fail(500))
    replay = await env.turn("one")
    assert replay.triggers == ["no_stored_state", "provider_failed", "abort_recorded"]
    await env.turn("two")
    before = await stored_envelope(env)
    env.backend.push("openai", ScriptStep.fail(400, "invalid_request_error"))
    cursor = await env.turn("three")
    assert cursor.triggers == ["continue_with_cursor", "provider_failed", "abort_recorded"]
    assert await stored_envelope(env) == before
    env.backend.push("anthropic", ScriptStep.malformed())
    loop = await env.turn("four", provider="anthropic", model="claude-sonnet-4-5")
    assert loop.triggers[-2:] == ["provider_failed", "abort_recorded"]
    assert loop.final.reason == "provider_failed" and "malformed" in (loop.final.detail or "")


@scenario
async def in_stream_error_fails_cleanly(env: Env) -> None:
    """An error event after a 200 fails the turn as provider_failed."""
    env.backend.push("openai", ScriptStep.stream_error("server_error"))
    outcome = await env.turn("x")
    assert outcome.final.reason == "provider_failed" and "server_error" in str(
        outcome.path[-2].reason)


@scenario
async def tool_iteration_limit_aborts(env: Env) -> None:
    """A model that keeps calling tools is stopped at the iteration limit."""
    steps = [ScriptStep.call(("weather", {"city": "Paris"})) for _ in range(3)]
    env.backend.push("deepseek", *steps)
    outcome = await env.turn("loop", provider="deepseek", model="deepseek-chat",
                             tool_iteration_limit=2)
    assert outcome.triggers[-2:] == ["tool_iteration_limit", "abort_recorded"]
    assert outcome.triggers.count("tools_done") == 2 and outcome.final.stats.requests == 3


@scenario
async def tool_errors_reach_the_model(env: Env) -> None:
    """Bad arguments, exceptions, timeouts and unknown tools become error results."""

    async def boom(_: dict[str, Any]) -> Any:
        raise RuntimeError("kaput")

    tools = (tool("weather"), tool("boom", boom), tool("slow", forever, timeout=0.01))
    env.backend.push("anthropic", ScriptStep.call(
        ("weather", "{not json"), ("weather", {"town": "x"}), ("boom", {"city": "a"}),
        ("slow", {"city": "b"}), ("nope", {}), ("weather", {"city": "ok"})),
        ScriptStep.reply("handled"))
    outcome = await env.turn("tools", provider="anthropic", model="claude-sonnet-4-5",
                             tools=tools)
    assert_committed(outcome)
    results = outcome.of_type("tool_result")
    errors = [json.loads(r.output)["error"] for r in results if r.is_error]
    assert len(errors) == 5 and not results[-1].is_error
    for needle, message in zip(["not valid JSON", "missing required property 'city'",
                                "RuntimeError: kaput", "timed out", "unknown tool"], errors,
                               strict=True):
        assert needle in message, message


@scenario
async def tool_exception_text_is_scrubbed(env: Env) -> None:
    """A tool failing with a connection string and a key in its message: the error
    result the event stream, the store and the model's next request get holds neither
    (issue 24, item 10: through the one scrubber)."""
    key = "sk-proj-" + "Q7x" * 12
    dsn_password = "s3cr3t-Pw-9"

    async def leaky(_: dict[str, Any]) -> Any:
        msg = (f"could not connect to postgresql://app:{dsn_password}@db.internal/prod "
               f"with api_key={key}")
        raise ConnectionError(msg)

    env.backend.push("openai", ScriptStep.call(("leaky", {"city": "a"})),
                     ScriptStep.reply("handled"))
    outcome = await env.turn("tools", tools=(tool("leaky", leaky),))
    assert_committed(outcome)
    (result,) = outcome.of_type("tool_result")
    error = json.loads(result.output)["error"]
    assert "ConnectionError" in error and "db.internal" in error
    stored = json.dumps([attrs.asdict(p) for m in await env.store.load_history(env.chat_id)
                         for p in m.parts])
    sent = json.dumps(env.backend.requests[-1].body)
    for text in (error, stored, sent):
        assert dsn_password not in text and key not in text, text


@scenario
async def commit_conflict_aborts(env: Env) -> None:
    """An edit while a turn runs is ChatBusy; a change it cannot refuse (the cursor's
    clear) makes the turn's commit conflict; nothing is half-written."""
    await env.turn("one")
    gate = asyncio.Event()
    env.backend.push("openai", ScriptStep.reply("late", gate=gate, gate_after=0))
    sent = len(env.backend.requests)
    task = asyncio.ensure_future(collect(env.engine.run_turn(env.chat_id, make_turn("two"))))
    await env.backend.wait_for_requests(sent + 1)
    first_seq = (await env.store.load_history(env.chat_id))[0].seq
    with pytest.raises(ChatBusy):
        await env.store.edit_message(env.chat_id, first_seq, [TextPart(text="one, edited")])
    await env.store.clear_provider_state(env.chat_id, reason="test")
    gate.set()
    outcome = await task
    env.outcomes.append(outcome)
    assert outcome.triggers[-3:] == ["completed", "commit_conflict", "abort_recorded"]
    assert await stored_envelope(env) is None  # the clear cleared it; the turn set nothing


class _FailingCommits:
    """A store whose commits fail with a storage error (a full disk, say)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def commit_turn(self, *args: Any) -> Any:
        raise StorageError("disk full")


@scenario
async def commit_failure_aborts(env: Env) -> None:
    """A storage error during the commit aborts the turn and releases the chat."""
    engine = env.engine
    failing = type(engine)(_FailingCommits(env.store), engine.adapters, engine.transport,
                           clock=env.clock)
    outcome = await collect(failing.run_turn(env.chat_id, make_turn("x")))
    env.outcomes.append(outcome)
    assert outcome.triggers[-2:] == ["commit_failed", "abort_recorded"]
    assert (await env.turn("next")).committed


@scenario
async def busy_chat_is_refused_before_any_call(env: Env) -> None:
    """A second turn on a chat with a live lease gets ChatBusy before any provider call."""
    gate = asyncio.Event()
    env.backend.push("openai", ScriptStep.reply("slow", gate=gate, gate_after=0))
    first = asyncio.ensure_future(collect(env.engine.run_turn(env.chat_id, make_turn("a"))))
    await env.backend.wait_for_requests(1)
    sent = len(env.backend.requests)
    try:
        await collect(env.engine.run_turn(env.chat_id, make_turn("b")))
    except ChatBusy:
        pass
    else:  # pragma: no cover
        raise AssertionError("the second turn was not refused")
    assert len(env.backend.requests) == sent
    gate.set()
    env.outcomes.append(await first)


# --- cancellation ------------------------------------------------------------------------


async def _cancel_after(env: Env, turn: Any, stop: Callable[[TurnEvent], bool]) -> str:
    """Consume a turn until ``stop`` says so, then close the iterator (a client leaving)."""
    async with aclosing(env.engine.run_turn(env.chat_id, turn)) as events:
        async for event in events:
            if stop(event):
                break
    turns = await env.store.list_turns(env.chat_id, limit=1)
    record = turns[0]
    assert record.status == TurnStatus.ABORTED and record.reason == "cancelled", record
    note_path(env, record.path)
    return record.id


@scenario
async def cancellation_in_every_state(env: Env) -> None:
    """Leaving mid-turn aborts with cancelled, releases the lease and stores no cursor."""
    gate = asyncio.Event()
    env.backend.push("openai", ScriptStep.reply("never", chunks=3, gate=gate, gate_after=1))
    await _cancel_after(env, make_turn("a"), lambda e: e.type == "text_delta")
    assert await stored_envelope(env) is None
    await env.turn("b")
    before = await stored_envelope(env)
    env.backend.push("openai", ScriptStep.reply("never", chunks=3, gate=gate, gate_after=1))
    await _cancel_after(env, make_turn("c"), lambda e: e.type == "text_delta")
    env.backend.push("openai", ScriptStep.call(("stuck", {"city": "x"})))
    await _cancel_after(env, make_turn("d", tools=(tool("stuck", forever),)),
                        lambda e: e.type == "tool_call")
    env.backend.push("anthropic", ScriptStep.reply("x", chunks=2, gate=gate, gate_after=1))
    await _cancel_after(env, make_turn("e", provider="anthropic", model="claude-sonnet-4-5"),
                        lambda e: e.type == "text_delta")
    # The anthropic turn degraded (provider_changed) but never committed: the cursor stays.
    assert before is not None and await stored_envelope(env) == before
    await env.turn("e2")
    await _cancel_after(env, make_turn("f", model="gpt-4.1"),
                        lambda e: e.type == "fallback_notice")
    assert (await env.turn("g")).committed


@scenario
async def task_cancellation_aborts(env: Env) -> None:
    """Cancelling the task that runs a turn aborts it the same way."""
    gate = asyncio.Event()
    env.backend.push("openai", ScriptStep.reply("never", gate=gate, gate_after=0))
    task = asyncio.ensure_future(collect(env.engine.run_turn(env.chat_id, make_turn("a"))))
    await env.backend.wait_for_requests(1)
    task.cancel()
    with suppress(asyncio.CancelledError):
        await task
    record = (await env.store.list_turns(env.chat_id, limit=1))[0]
    assert record.status == TurnStatus.ABORTED and record.reason == "cancelled"
    assert (await env.turn("b")).committed



# The recovery scenarios (issue 17) and the exits of issue 12 live in their own modules
# and register themselves here.
from tests.engine import (  # noqa: E402, F401
    recovery_scenarios,
    scenarios_deadline,
    scenarios_exits,
    scenarios_lease,
    scenarios_money,
    scenarios_overflow,
    scenarios_stop,
)
