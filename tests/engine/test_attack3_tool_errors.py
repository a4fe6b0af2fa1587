"""A tool's exception is read safely and cut before the scrubber (attack3).

``run_tool`` wrote a failed handler's exception with ``f"{exc}"``: an exception whose
``__str__`` raises (the tool's code too) escaped the task group and aborted the turn
``internal_error``, every other call's result lost. And the whole message went through
the scrubber before anything cut it: a 50 MB message held the event loop for 14 s (the
scrubber's regular expressions take about 0.3 s a MB) and 200 MiB, though the model gets
at most the turn's ``max_tool_result_chars`` of it.
"""

from __future__ import annotations

import json
from typing import Any

from tests.engine.support import Env, tool
from turnstate.emulators._scripted import ScriptStep
from turnstate.engine._tools import MAX_ERROR_CHARS

KEY = "sk-ant-api03-" + "Q" * 90


class _Unreadable(Exception):
    def __str__(self) -> str:
        msg = "no text for this exception"
        raise RuntimeError(msg)


async def _turn(env: Env, handler: Any) -> dict[str, Any]:
    env.backend.push("anthropic", ScriptStep.call(("odd", {"city": "a"}), ("fine", {"city": "b"})),
                     ScriptStep.reply("done"))
    outcome = await env.turn("x", provider="anthropic", model="claude-sonnet-4-5",
                             tools=(tool("odd", handler), tool("fine")))
    assert outcome.committed, outcome.final
    results = {e.name: e for e in outcome.of_type("tool_result")}
    assert not results["fine"].is_error
    assert results["odd"].is_error
    return {"output": results["odd"].output}


async def test_an_exception_whose_text_cannot_be_read_is_an_error_result(env: Env) -> None:
    async def raises(_: dict[str, Any]) -> Any:
        raise _Unreadable

    result = await _turn(env, raises)
    assert json.loads(result["output"]) == {
        "error": "tool 'odd' failed: _Unreadable: (its message could not be read: RuntimeError)"}


async def test_a_huge_exception_message_is_cut_before_it_is_scrubbed(env: Env) -> None:
    size = 50 << 20
    body = "y" * (MAX_ERROR_CHARS - 60) + " " + KEY + " " + "z" * size

    async def raises(_: dict[str, Any]) -> Any:
        raise ValueError(body)

    result = await _turn(env, raises)
    text = json.loads(result["output"])["error"]
    assert len(text) < MAX_ERROR_CHARS + 100, len(text)
    assert text.endswith(f"[turnstate: cut to {MAX_ERROR_CHARS:,} of "
                         f"{len(body) + len('tool ' + repr('odd') + ' failed: ValueError: '):,}"
                         " characters]"), text[-120:]
    assert "sk-ant" not in text and "QQQQ" not in text  # the key across the cut: redacted
