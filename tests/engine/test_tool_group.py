"""Tools under structured concurrency (issue 20, item 5): a tool's own cancellation is an
error result the model sees; a cancelled turn cancels and awaits every call."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from tests.engine.support import Env, make_turn, tool
from turnstate.core import ToolCallPart
from turnstate.emulators._scripted import ScriptStep
from turnstate.engine._tools import run_tools
from turnstate.storage import TurnStatus


async def _cancels_itself(_: dict[str, Any]) -> Any:
    raise asyncio.CancelledError


async def test_a_tool_raising_cancelled_error_is_an_error_result_and_the_turn_commits(
        env: Env) -> None:
    finished: list[str] = []

    async def slow(_: dict[str, Any]) -> Any:
        await asyncio.sleep(0)
        finished.append("slow")
        return "done"

    env.backend.push("anthropic",
                     ScriptStep.call(("quits", {"city": "a"}), ("slow", {"city": "b"})),
                     ScriptStep.reply("fine"))
    outcome = await env.turn("x", provider="anthropic", model="claude-sonnet-4-5",
                             tools=(tool("quits", _cancels_itself), tool("slow", slow)))
    assert outcome.committed, outcome.final
    results = {e.name: e for e in outcome.of_type("tool_result")}
    assert results["quits"].is_error and "was cancelled" in results["quits"].output
    assert not results["slow"].is_error and finished == ["slow"]


async def test_a_cancelled_turn_cancels_and_awaits_every_tool_before_it_ends(env: Env) -> None:
    started, ended = asyncio.Event(), []

    async def holds(_: dict[str, Any]) -> Any:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)  # cleanup that takes a step
            ended.append("holds")

    env.backend.push("anthropic",
                     ScriptStep.call(("holds", {"city": "a"}), ("holds", {"city": "b"})))

    async def consume() -> None:
        async for _ in env.engine.run_turn(env.chat_id, make_turn(
                "x", provider="anthropic", model="claude-sonnet-4-5",
                tools=(tool("holds", holds),))):
            pass

    task = asyncio.ensure_future(consume())
    await started.wait()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert ended == ["holds", "holds"]  # both calls finished before the turn returned
    record = (await env.store.list_turns(env.chat_id, limit=1))[0]
    assert record.status is TurnStatus.ABORTED and record.reason == "cancelled"


async def test_a_tool_timeout_is_an_error_result() -> None:
    async def sleeps(_: dict[str, Any]) -> Any:
        await asyncio.Event().wait()

    call = ToolCallPart(call_id="c1", name="sleeps", arguments='{"city": "a"}')
    (result,) = await run_tools([call], {"sleeps": tool("sleeps", sleeps, timeout=0.01)})
    assert result.is_error and "timed out" in result.output
