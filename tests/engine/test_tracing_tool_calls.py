"""Each tool call's ``execute_tool`` span covers its own run (helper "follow7"): parallel
calls overlap, each with its own duration and status, and an iteration a stop cuts still
says which calls ran and which it cut. Before, every call's span covered the whole
iteration (one start, one end for all) and a cut iteration had none."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from opentelemetry.trace import StatusCode

from tests.engine.support import forever, make_turn, tool
from tests.engine.test_tracing import Traced, attrs_of, named, traced
from turnstate.emulators._scripted import ScriptStep

__all__ = ["traced"]  # the fixture, shared with test_tracing


async def _at_once(args: dict[str, Any]) -> Any:
    return {"ok": args}


async def test_parallel_tool_calls_get_their_own_overlapping_spans(traced: Traced) -> None:
    """``quick`` returns at once, ``slow`` hangs until its 0.05 s timeout (an error
    result): both start together, ``quick`` ends first, ``slow`` lasts its timeout."""
    traced.backend.push("openai", ScriptStep.call(("quick", {"city": "a"}),
                                                  ("slow", {"city": "b"})),
                        ScriptStep.reply("done"))
    tools = (tool("quick", _at_once), tool("slow", forever, timeout=0.05))
    outcome = await traced.turn("go", tools=tools)
    assert outcome.final.type == "turn_completed"
    spans = traced.spans()
    [iteration] = named(spans, "tool_iteration")
    [quick] = named(spans, "execute_tool quick")
    [slow] = named(spans, "execute_tool slow")
    for span in (quick, slow):
        assert span.parent is not None and iteration.context is not None
        assert span.parent.span_id == iteration.context.span_id
        assert iteration.start_time <= span.start_time <= span.end_time <= iteration.end_time
        assert attrs_of(span)["gen_ai.tool.type"] == "function"
    assert slow.start_time < quick.end_time < slow.end_time  # they overlap
    assert quick.end_time - quick.start_time < 50_000_000 <= slow.end_time - slow.start_time
    assert quick.status.status_code is not StatusCode.ERROR
    assert attrs_of(slow)["error.type"] == "tool_error"
    assert slow.status.status_code is StatusCode.ERROR


async def test_a_stopped_iteration_says_which_calls_ran_and_which_it_cut(
        traced: Traced) -> None:
    entered = asyncio.Event()

    async def hangs(_: dict[str, Any]) -> Any:
        entered.set()
        await forever({})

    traced.backend.push("openai", ScriptStep.call(("quick", {"city": "a"}),
                                                  ("hangs", {"city": "b"})))
    turn = make_turn("go", turn_id="t-cut", tools=(tool("quick", _at_once), tool("hangs", hangs)))
    seen: list[str] = []

    async def consume() -> None:
        async with contextlib.aclosing(traced.engine.run_turn(traced.chat_id, turn)) as events:
            seen.extend([event.type async for event in events])

    task = asyncio.create_task(consume())
    await entered.wait()
    await traced.engine.stop("t-cut", chat_id=traced.chat_id)
    await task
    assert seen[-1] == "turn_aborted"
    spans = traced.spans()
    [quick] = named(spans, "execute_tool quick")
    [cut] = named(spans, "execute_tool hangs")
    assert "error.type" not in attrs_of(quick)
    assert attrs_of(cut)["error.type"] == "cancelled"
    assert cut.status.status_code is StatusCode.ERROR
    assert quick.end_time < cut.end_time
