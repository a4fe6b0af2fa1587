"""A tool handler's ``BaseException`` is the model's tool error, not the turn's end or
the process's (attack3).

``run_tool`` caught ``Exception`` and the handler's own ``CancelledError`` only. A
handler raising ``GeneratorExit`` or a ``BaseException`` class of its own escaped the
turn's task group: the turn aborted with no ``turn_aborted`` event and ``run_turn``
raised a bare ``BaseExceptionGroup``. A handler raising ``SystemExit`` (a library that
exits on bad input, as ``argparse`` does on arguments the model made up) ran in a task,
and asyncio re-raises a task's ``SystemExit`` out of the event loop: the process (a
whole server) ended. ``KeyboardInterrupt`` still goes on: the user's interrupt.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import pytest

from tests.engine.support import Env, tool
from turnstate.core._conversation import ToolCallPart
from turnstate.emulators._scripted import ScriptStep


class _OwnExit(BaseException):
    """A ``BaseException`` of a tool's own."""


def _argparse_exit(arguments: dict[str, Any]) -> None:
    parser = argparse.ArgumentParser(prog="weather", exit_on_error=False, add_help=False)
    parser.add_argument("--days", type=int, required=True)
    parser.parse_args([str(arguments.get("city", ""))])  # exits: the required flag is missing


EXITS: dict[str, BaseException] = {
    "SystemExit": SystemExit(2), "GeneratorExit": GeneratorExit(), "own": _OwnExit("odd"),
}


def _raising(name: str, *, at_once: bool) -> Any:
    if name == "argparse":
        if at_once:
            def plain(arguments: dict[str, Any]) -> Any:
                _argparse_exit(arguments)
            return plain

        async def parses(arguments: dict[str, Any]) -> Any:
            await asyncio.sleep(0)
            _argparse_exit(arguments)
        return parses
    exc = EXITS[name]
    if at_once:
        def raises_at_once(_: dict[str, Any]) -> Any:
            raise exc
        return raises_at_once

    async def raises(_: dict[str, Any]) -> Any:
        await asyncio.sleep(0)  # raised inside the handler's task
        raise exc
    return raises


@pytest.mark.parametrize("at_once", [False, True], ids=["in-task", "at-call"])
@pytest.mark.parametrize("name", ["SystemExit", "argparse", "GeneratorExit", "own"])
async def test_a_handler_base_exception_is_an_error_result_and_the_turn_commits(
        env: Env, name: str, at_once: bool) -> None:
    env.backend.push("anthropic", ScriptStep.call(("odd", {"city": "a"}), ("fine", {"city": "b"})),
                     ScriptStep.reply("done"))
    try:
        outcome = await env.turn("x", provider="anthropic", model="claude-sonnet-4-5",
                                 tools=(tool("odd", _raising(name, at_once=at_once)),
                                        tool("fine")))
    except BaseException as exc:  # SystemExit too: reported
        pytest.fail(f"the turn raised {exc!r}")
    assert outcome.committed, outcome.final
    results = {e.name: e for e in outcome.of_type("tool_result")}
    assert results["odd"].is_error, results["odd"]
    expected = {"argparse": "SystemExit", "own": "_OwnExit"}.get(name, name)
    assert f"tool 'odd' failed: {expected}" in results["odd"].output, results["odd"].output
    assert not results["fine"].is_error


def test_a_handler_system_exit_does_not_leave_the_event_loop() -> None:
    """A task's ``SystemExit`` leaves ``run_until_complete`` whatever awaits the task:
    the handler must never raise it in a task of its own."""
    from turnstate.engine._tools import run_tools

    calls = (ToolCallPart(call_id="c1", name="odd", arguments='{"city": "a"}'),)
    loop = asyncio.new_event_loop()
    try:
        results = loop.run_until_complete(run_tools(
            calls, {"odd": tool("odd", _raising("SystemExit", at_once=False))}))
    except SystemExit:
        pytest.fail("the tool's SystemExit left the event loop")
    finally:
        loop.close()
    assert results[0].is_error and "SystemExit" in results[0].output


async def test_keyboard_interrupt_from_a_handler_still_goes_on() -> None:
    """The user's interrupt is not the model's information: not made a tool error."""
    from turnstate.engine._tools import run_tool

    def interrupted(_: dict[str, Any]) -> Any:
        raise KeyboardInterrupt

    call = ToolCallPart(call_id="c1", name="odd", arguments='{"city": "a"}')
    with pytest.raises(KeyboardInterrupt):
        await run_tool(call, tool("odd", interrupted))
