"""A tool handler that ignores its cancellation is abandoned after a grace, never waited
for forever (it held the turn, its chat's lease, a stop and a shutdown), and a value it
returns after its timeout is never used."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from tests.engine.support import Env, make_turn, tool
from turnstate.core import ToolCallPart
from turnstate.emulators._scripted import ScriptStep
from turnstate.engine import _tools
from turnstate.engine._tools import run_tools
from turnstate.storage import TurnStatus

CALL = ToolCallPart(call_id="c1", name="stubborn", arguments='{"city": "a"}')
Handler = Callable[[dict[str, Any]], Coroutine[Any, Any, Any]]


@pytest.fixture(autouse=True)
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_tools, "CANCEL_GRACE_SECONDS", 0.05, raising=False)


def stubborn(started: asyncio.Event, release: asyncio.Event) -> Handler:
    """A handler that swallows every cancellation until ``release`` is set."""

    async def handler(_: dict[str, Any]) -> Any:
        started.set()
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await release.wait()
        return "finally"

    return handler


async def test_a_handler_ignoring_its_timeout_s_cancel_is_abandoned_with_a_timeout_error(
        caplog: pytest.LogCaptureFixture) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    tools = {"stubborn": tool("stubborn", stubborn(started, release), timeout=0.01)}
    try:
        async with asyncio.timeout(10):  # the old code waited for the handler forever
            (result,) = await run_tools([CALL], tools)
        assert result.is_error and "timed out after 0.01 s" in result.output
        assert "did not stop within" in caplog.text and "stubborn" in caplog.text
        assert len(_tools._ABANDONED) == 1
    finally:
        release.set()
        for _ in range(3):
            await asyncio.sleep(0)  # the abandoned handler ends and is let go
    assert not _tools._ABANDONED


async def test_a_value_returned_after_the_timeout_is_not_the_result() -> None:
    async def late(_: dict[str, Any]) -> Any:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(0)
            return "a late answer"  # the old code reported it as the tool's success

    (result,) = await run_tools([CALL], {"stubborn": tool("stubborn", late, timeout=0.01)})
    assert result.is_error and "timed out" in result.output and "late" not in result.output
    assert not _tools._ABANDONED


async def test_a_cancelled_turn_ends_though_a_handler_ignores_the_cancel(
        env: Env, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    started, release = asyncio.Event(), asyncio.Event()
    env.backend.push("anthropic", ScriptStep.call(("stubborn", {"city": "a"})))

    async def consume() -> None:
        async for _ in env.engine.run_turn(env.chat_id, make_turn(
                "x", provider="anthropic", model="claude-sonnet-4-5",
                tools=(tool("stubborn", stubborn(started, release)),))):
            pass

    task = asyncio.ensure_future(consume())
    try:
        await started.wait()
        task.cancel()
        done, _ = await asyncio.wait((task,), timeout=10)  # not cancelling what it awaits
        assert done, "the turn waited for a handler that ignores its cancellation"
        assert task.cancelled()
        record = (await env.store.list_turns(env.chat_id, limit=1))[0]
        assert record.status is TurnStatus.ABORTED and record.reason == "cancelled"
        assert (await env.store.load_chat(env.chat_id)).active_turn_id is None
        assert "abandoned" in caplog.text
    finally:
        release.set()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        for _ in range(3):
            await asyncio.sleep(0)
    assert not _tools._ABANDONED
