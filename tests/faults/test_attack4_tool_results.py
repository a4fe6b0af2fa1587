"""A tool's huge result is cut before it is scanned for lone surrogates (attack4).

``run_tools`` repaired a result (every lone surrogate replaced, ``repaired``: a regular
expression over the whole text) before ``capped_result`` cut it to the characters the
model gets. A tool that returned 200 MB of non-ASCII text (a file or a page read whole)
held the event loop for about 10 s under load, every other turn, request and lease
renewal of the process waiting, though the model got 128,000 characters of it at most.
The result is now cut first; the scan reads what is kept.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.support import tool
from turnstate.core._conversation import ToolCallPart
from turnstate.engine import _tools
from turnstate.engine._tools import run_tools

LIMIT = 1_000


def _call(name: str = "read") -> ToolCallPart:
    return ToolCallPart(call_id="call_1", name=name, arguments='{"city": "x"}')


async def _result(output: str) -> str:
    async def handler(_: dict[str, Any]) -> Any:
        return output

    (result,) = await run_tools([_call()], {"read": tool("read", handler)}, max_chars=LIMIT)
    return result.output


async def test_a_huge_result_is_scanned_no_further_than_the_cut(
        monkeypatch: pytest.MonkeyPatch) -> None:
    scanned: list[int] = []
    scan = _tools.repaired

    def counting(text: str) -> tuple[str, int]:
        scanned.append(len(text))
        return scan(text)

    monkeypatch.setattr(_tools, "repaired", counting)
    output = await _result("é" * (20 << 20))
    assert output.startswith("é" * LIMIT)
    assert f"cut to its first {LIMIT:,} of {20 << 20:,} characters" in output
    assert scanned and max(scanned) < LIMIT + 200, scanned


async def test_a_lone_surrogate_in_what_is_kept_is_still_repaired() -> None:
    output = await _result("\ud800" + "é" * (2 * LIMIT))
    assert output.startswith("\ufffd" + "é")
    assert "cut to its first" in output
    assert "1 character(s) that UTF-8 cannot encode were replaced" in output
    output.encode("utf-8")


async def test_a_lone_surrogate_past_the_cut_goes_with_what_is_cut() -> None:
    output = await _result("é" * (2 * LIMIT) + "\ud800")
    assert "cut to its first" in output and "U+FFFD" not in output
    output.encode("utf-8")
