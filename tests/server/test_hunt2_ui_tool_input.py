"""Tool arguments (or a tool's output) that Python's JSON reader takes but JSON has no
spelling for reach the page as text, never as ``NaN`` or ``Infinity``.

``tool_input`` decoded a call's arguments with ``json.loads``, which reads ``NaN``,
``-Infinity`` and ``1e999`` (an infinity); ``json.dumps`` then wrote them back as
``NaN`` / ``Infinity``, which the browser's ``JSON.parse`` refuses: the AI SDK's stream
of the turn broke at the ``tool-input-available`` chunk, and ``GET
/api/ui-messages/{chat}`` (the page's history) stopped loading for good. Arguments nested
deeper than the reader's recursion limit raised ``RecursionError`` out of the stream.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from turnstate.core._conversation import (
    Message,
    MessageStatus,
    Role,
    ToolCallPart,
    ToolResultPart,
)
from turnstate.server._ui_stream import UiStream, sse, ui_message

HOSTILE = ['{"city": NaN}', '{"city": -Infinity}', '{"n": 1e999}', "[" * 100_000 + "]" * 100_000]


def strict(text: str) -> object:
    def refuse(name: str) -> None:
        raise ValueError(name)
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("arguments", HOSTILE, ids=["nan", "infinity", "overflow", "deep"])
def test_a_streamed_call_and_result_are_json_the_browser_reads(arguments: str) -> None:
    stream = UiStream("turn-1")
    chunks = [*stream.chunks("tool_call", {"callId": "c1", "name": "calc",
                                          "arguments": arguments}),
              *stream.chunks("tool_result", {"callId": "c1", "name": "calc",
                                            "output": arguments, "isError": False})]
    for chunk in chunks:
        strict(sse(chunk).decode().removeprefix("data: "))
    assert chunks[-2]["input"] == arguments  # shown as the text it was
    assert chunks[-1]["output"] == arguments


@pytest.mark.parametrize("arguments", HOSTILE, ids=["nan", "infinity", "overflow", "deep"])
def test_a_stored_call_and_result_are_json_the_browser_reads(arguments: str) -> None:
    now = datetime(2026, 12, 4, tzinfo=UTC)
    message = Message(
        id="m2", chat_id="c", seq=2, role=Role.ASSISTANT, status=MessageStatus.COMPLETED,
        parts=(ToolCallPart(call_id="c1", name="calc", arguments=arguments),
               ToolResultPart(call_id="c1", name="calc", output=arguments)),
        created_at=now, updated_at=now)
    strict(json.dumps(ui_message(message)))
