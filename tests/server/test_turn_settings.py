"""The server's turn API: per-turn settings in the body, the finish reason on
turn_completed, and the provider's failure facts on turn_aborted (issue 23)."""

from __future__ import annotations

import json

from tests.server.support import Api
from turnstate.emulators._base import Fault

LONG = ("please repeat all of these words back to me, every one of them in order, "
        "twenty five words or more, until you are stopped")  # > 16 words: cut at 16


async def test_settings_reach_the_wire_and_a_length_stop_says_so(api: Api) -> None:
    chat_id = await api.new_chat()
    events = await api.turn(chat_id, text=LONG,
                            settings={"max_output_tokens": 16, "temperature": 0.5})
    final = events[-1]
    assert final.event == "turn_completed"
    assert (final.data["finishReason"], final.data["finishReasonRaw"]) == (
        "length", "max_output_tokens")
    body = json.loads(api.stack.emulators["openai"].requests[-1].body)
    assert (body["max_output_tokens"], body["temperature"]) == (16, 0.5)
    view = await api.json("GET", f"/api/chats/{chat_id}")
    answer = view["messages"][-1]
    assert answer["turn"]["metadata"]["finishReason"] == "length"


async def test_a_bad_or_refused_setting_is_a_400_naming_it(api: Api) -> None:
    chat_id = await api.new_chat()
    for settings, field in (({"max_output_tokens": "many"}, "settings.max_output_tokens"),
                            ({"colour": "blue"}, "settings.colour"),
                            ({"seed": 3}, "settings.seed"),
                            ({"reasoning_effort": "high"}, "settings.reasoning_effort")):
        refused = await api.json("POST", f"/api/chats/{chat_id}/turns", status=400,
                                 json={"provider": "openai", "model": "gpt-4o",
                                       "text": "hi", "settings": settings})
        assert refused["field"] == field, refused
    assert not api.stack.emulators["openai"].requests


async def test_a_rate_limit_reaches_the_stream_with_its_facts(api: Api) -> None:
    chat_id = await api.new_chat()
    for _ in range(5):  # more than the transport's retries
        api.stack.emulators["openai"].faults.push(Fault(
            status=429, headers={"Retry-After": "0"},
            body={"error": {"message": "slow down", "code": "rate_limit_exceeded"}}))
    events = await api.turn(chat_id, text="hello")
    final = events[-1]
    assert final.event == "turn_aborted"
    failure = final.data["failure"]
    assert (failure["status"], failure["errorType"], failure["code"], failure["retryable"]) == (
        429, "rate_limited", "rate_limit_exceeded", True)
