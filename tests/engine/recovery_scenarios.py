"""Engine scenarios for the opt-in recovery of in-flight tool results (issue 17).

Registered in ``tests.engine.scenarios.SCENARIOS`` (that module imports this one), so
``test_scenarios.py`` runs each against every store and ``test_edge_coverage.py``
counts the recovery edges they take.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from tests.engine.scenarios import scenario, stored_envelope
from tests.engine.support import Env, Outcome, collect, make_turn, tool
from turnstate.core import TransitionPart, parse_envelope
from turnstate.core._conversation import ToolResultPart
from turnstate.emulators._scripted import ScriptStep

LOSS = "tool_result_cursor_loss"


class CountingTool:
    """A tool handler that counts its runs per ``city`` (each call gets its own city)."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()

    async def __call__(self, args: dict[str, Any]) -> Any:
        self.runs[args["city"]] += 1
        return {"forecast": f"sunny in {args['city']}"}


def _tools(counter: CountingTool) -> tuple[Any, ...]:
    return (tool("weather", counter), tool("time", counter))


def assert_each_call_ran_once(outcome: Outcome, counter: CountingTool) -> None:
    """Every tool call of the turn ran exactly once, and its result is the one recorded."""
    calls = outcome.of_type("tool_call")
    ids = [c.call_id for c in calls]
    assert len(ids) == len(set(ids))
    assert counter.runs == Counter(json.loads(c.arguments)["city"] for c in calls)
    assert all(n == 1 for n in counter.runs.values()), counter.runs
    assert [r.call_id for r in outcome.of_type("tool_result")] == ids


@scenario
async def cursor_loss_with_tool_results_recovers(env: Env) -> None:
    """Opted in: the lost cursor's turn replays history + user + calls + results, the
    tools do not run again, and the commit records the recovery."""
    await env.turn("one")
    counter = CountingTool()
    env.backend.push("openai", ScriptStep.call(("weather", {"city": "Paris"}),
                                               ("time", {"city": "Oslo"})),
                     ScriptStep.reject_cursor("cursor_expired"), ScriptStep.reply("kept"))
    outcome = await env.turn("two", tools=_tools(counter), recover_tool_results=True)
    assert outcome.triggers == ["continue_with_cursor", "tool_calls", "tools_done", LOSS,
                                "completed", "committed"]
    assert outcome.states[4] == "replay" and outcome.final.strategy == "replay"
    assert outcome.final.degradation == LOSS and outcome.final.stats.requests == 3
    assert_each_call_ran_once(outcome, counter)
    replay = env.backend.requests[-1].body
    assert replay["cursor"] is None and replay["toolResults"] == []
    assert [i["text"] for i in replay["history"]] == ["one", "ok"] and replay["user"] == "two"
    call_ids = [c.call_id for c in outcome.of_type("tool_call")]
    assert [(i["kind"], i["call_id"]) for i in replay["turn"]] == [
        ("tool_call", call_ids[0]), ("tool_call", call_ids[1]),
        ("tool_result", call_ids[0]), ("tool_result", call_ids[1])]
    [notice] = outcome.of_type("fallback_notice")
    assert notice.reason == LOSS and "results kept" in notice.message
    parts = (await env.store.load_history(env.chat_id))[-1].parts
    assert [(p.reason, p.source_state, p.recovered) for p in parts
            if isinstance(p, TransitionPart)] == [(LOSS, "cursor", True)]
    assert [p.call_id for p in parts if isinstance(p, ToolResultPart)] == call_ids
    assert parse_envelope(await stored_envelope(env)).cursor == env.backend.response_ids[-1]
    after = await env.turn("three")
    assert after.triggers[0] == "continue_with_cursor"


@scenario
async def recovery_is_off_by_default_and_the_engine_sets_the_default(env: Env) -> None:
    """Without the flag the turn aborts as before; TurnEngine's default applies when the
    turn does not say, and the turn's own False wins over the engine's True."""
    await env.turn("one")
    env.backend.push("openai", ScriptStep.call(("weather", {"city": "Rome"})),
                     ScriptStep.reject_cursor("cursor_expired"))
    plain = await env.turn("two")
    assert plain.final.reason == LOSS and "replay" not in plain.states
    engine = env.engine
    opted_in = type(engine)(env.store, engine.adapters, engine.transport, clock=env.clock,
                            recover_tool_results=True)
    for flag, recovered in ((None, True), (False, False)):
        await env.turn("again")  # a fresh, live cursor
        env.backend.push("openai", ScriptStep.call(("weather", {"city": "Rome"})),
                         ScriptStep.reject_cursor("cursor_invalid"))
        turn = make_turn("three", recover_tool_results=flag)
        outcome = await collect(opted_in.run_turn(env.chat_id, turn))
        env.outcomes.append(outcome)
        assert outcome.committed is recovered, (flag, outcome.triggers)


@scenario
async def failed_recovery_replay_aborts_with_tool_result_cursor_loss(env: Env) -> None:
    """The replay that carries the results fails: the turn aborts with the same reason as
    without recovery, the tool ran once, and no cursor is stored."""
    await env.turn("one")
    counter = CountingTool()
    env.backend.push("openai", ScriptStep.call(("weather", {"city": "Lima"})),
                     ScriptStep.reject_cursor("cursor_expired"), ScriptStep.fail(500))
    outcome = await env.turn("two", tools=_tools(counter), recover_tool_results=True)
    assert outcome.triggers == ["continue_with_cursor", "tool_calls", "tools_done", LOSS,
                                LOSS, "abort_recorded"]
    assert outcome.final.reason == LOSS and outcome.final.stats.requests == 3
    assert_each_call_ran_once(outcome, counter)
    assert await stored_envelope(env) is None  # the lost cursor was cleared at degradation
    messages = await env.store.list_messages(env.chat_id)
    assert [m.status for m in messages[-2:]] == ["aborted", "aborted"]


@scenario
async def a_turn_recovers_at_most_once(env: Env) -> None:
    """A second loss after the recovery aborts; so does a first loss after a replay retry
    (one extra request per turn at most: 1 + iterations + 1)."""
    await env.turn("one")
    counter = CountingTool()
    env.backend.push("openai", ScriptStep.call(("weather", {"city": "Kyiv"})),
                     ScriptStep.reject_cursor("cursor_expired"),
                     ScriptStep.call(("time", {"city": "Baku"})),
                     ScriptStep.reject_cursor("cursor_invalid"))
    twice = await env.turn("two", tools=_tools(counter), recover_tool_results=True)
    assert twice.triggers == ["continue_with_cursor", "tool_calls", "tools_done", LOSS,
                              "tool_calls", "tools_done", LOSS, "abort_recorded"]
    assert twice.final.reason == LOSS and twice.final.stats.requests == 1 + 2 + 1
    assert_each_call_ran_once(twice, counter)
    await env.turn("fresh")
    env.backend.push("openai", ScriptStep.reject_cursor("cursor_expired"),
                     ScriptStep.call(("weather", {"city": "Riga"})),
                     ScriptStep.reject_cursor("cursor_expired"))
    retried = await env.turn("three", recover_tool_results=True)
    assert retried.triggers == ["continue_with_cursor", "cursor_expired", "tool_calls",
                                "tools_done", LOSS, "abort_recorded"]
    assert retried.final.stats.requests == 1 + 1 + 1
