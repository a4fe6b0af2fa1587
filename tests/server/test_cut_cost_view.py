"""The chat view says when its cost is a floor (money, 2026-12-04): a turn whose request
was cut before any usage came (OpenAI's stream dropped mid-answer) billed figures nobody
reported; the chat's ``costUsd`` leaves it out and ``costUnknownTurns`` counts it (the
view said nothing: the chat's cost looked whole)."""

from __future__ import annotations

from decimal import Decimal

from tests.server.support import Api
from turnstate.emulators import Fault


async def test_a_turn_of_unknown_cost_is_counted_beside_the_chat_cost(api: Api) -> None:
    chat_id = await api.new_chat()
    await api.turn(chat_id, text="hello")
    api.stack.emulators["openai"].faults.push(Fault(cut_after=8))
    events = await api.turn(chat_id, text="tell me more " * 20)
    assert events[-1].event == "turn_aborted"
    view = await api.json("GET", f"/api/chats/{chat_id}")
    answers = [m["turn"] for m in view["messages"] if m["role"] == "assistant"]
    assert [t["costUsd"] is None for t in answers] == [False, True]
    assert answers[1]["metadata"]["usageMissing"] is True
    assert answers[1]["metadata"]["cutRequests"] == 1
    assert Decimal(view["costUsd"]) == Decimal(answers[0]["costUsd"])
    assert view["costUnknownTurns"] == 1
