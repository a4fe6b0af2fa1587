"""OpenAI Responses: a replayed call id past 64 characters is sent shortened.

The Responses API refuses ``input[].call_id`` longer than 64 characters ("Invalid
'input[5].call_id': string too long. Expected a string with maximum length 64, but got
a string with length 69 instead.", 400 ``string_above_max_length``), and ids that long
reach a chat: a Responses-compatible backend issued 69-character ones
(V1ki/dsh-plugin-subscriptions#29), and OpenAI-compatible servers mint their own. A
replay sends every stored call and its output with their ids, so such a chat could not
be replayed: the 400 came back on every request. A cursor turn's outputs keep the id
the server issued (it matches them to its stored calls), so only the replay's pairs
(the call and its output, both sent by turnstate) are rewritten.
"""

from __future__ import annotations

import json
from typing import Any

from tests.providers.support import message as msg
from turnstate.core._conversation import Role, TextPart, ToolCallPart, ToolResultPart, ToolSpec
from turnstate.core._decisions import Strategy
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers._protocol import ProviderCall
from turnstate.providers.openai_responses import OpenAIResponsesAdapter

MODEL = DEFAULT_REGISTRY.model("openai", "gpt-4o")
WEATHER = ToolSpec(name="weather", parameters={"type": "object", "properties": {}})
LONG = "call_" + "a1b2c3d4" * 8  # 69 characters
ADAPTER = OpenAIResponsesAdapter(base_url="http://127.0.0.1:1/v1", api_key="k")


def tool_turn(call_id: str) -> tuple[Any, ...]:
    call = ToolCallPart(call_id=call_id, name="weather", arguments="{}", provider="openai",
                        model="gpt-4o")
    result = ToolResultPart(call_id=call_id, name="weather", output="4C")
    return (msg(1, Role.USER, TextPart(text="weather?")),
            msg(2, Role.ASSISTANT, call, result, TextPart(text="4C.")))


def body(**changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {"strategy": Strategy.REPLAY, "model": MODEL, "system_prompt": "",
                              "tools": (WEATHER,), "history": tool_turn(LONG),
                              "user_text": "next"}
    decoded: dict[str, Any] = json.loads(ADAPTER.build_request(
        ProviderCall(**{**fields, **changes})).body)
    return decoded


def call_ids(payload: dict[str, Any]) -> list[str]:
    return [item["call_id"] for item in payload["input"] if "call_id" in item]


def test_a_long_replayed_call_id_is_shortened_in_the_call_and_its_output() -> None:
    ids = call_ids(body())
    assert len(ids) == 2 and ids[0] == ids[1] and len(ids[0]) <= 64
    assert ids == call_ids(body())  # the same bytes every request


def test_ids_within_the_limit_and_a_cursor_turns_outputs_keep_their_ids() -> None:
    assert call_ids(body(history=tool_turn("call_79382389"))) == ["call_79382389"] * 2
    result = ToolResultPart(call_id=LONG, name="weather", output="4C")
    cursor = body(strategy=Strategy.CURSOR, history=(), cursor="resp_1",
                  tool_results=(result,))
    assert call_ids(cursor) == [LONG]
