"""A tool that returns bytes or an image part gets an error result that says what to do,
never the value's ``repr`` (embed7).

``render_output`` sent anything that is neither text nor JSON as its ``str()``: a chart
returned as PNG bytes became ``b'\\x89PNG...'`` (4 characters a byte for most bytes), and
an ``ImagePart`` its attrs repr with the bytes in it, cut only at ``max_tool_result_chars``
(a quarter of the model's window): up to 32,000 tokens of escapes billed as input on every
request of the loop, and nothing the model could read. Tool results are text on every
wire turnstate speaks.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.support import Env, tool
from turnstate import FilePart, ImagePart
from turnstate.emulators._scripted import ScriptStep

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40


@pytest.mark.parametrize("value", [
    PNG, bytearray(PNG), memoryview(PNG),
    ImagePart(media_type="image/png", data=PNG),
    FilePart(data=b"%PDF-1.4 " + bytes(100)),
    {"chart": PNG}, [ImagePart(media_type="image/png", data=PNG)],
], ids=["bytes", "bytearray", "memoryview", "image-part", "file-part", "bytes-inside",
        "image-inside"])
async def test_bytes_or_media_from_a_tool_are_an_error_result_that_says_so(
        env: Env, value: object) -> None:
    async def chart(_: dict[str, Any]) -> Any:
        return value

    env.backend.push("anthropic",
                     ScriptStep.call(("chart", {"city": "a"}), ("fine", {"city": "b"})),
                     ScriptStep.reply("done"))
    outcome = await env.turn("x", provider="anthropic", model="claude-sonnet-4-5",
                             tools=(tool("chart", chart), tool("fine")))
    assert outcome.committed, outcome.final
    results = {e.name: e for e in outcome.of_type("tool_result")}
    assert results["chart"].is_error, results["chart"].output[:200]
    assert "binary" in results["chart"].output and "text" in results["chart"].output
    assert len(results["chart"].output) < 400  # no escapes of the bytes
    assert "\\x" not in results["chart"].output
    assert not results["fine"].is_error
