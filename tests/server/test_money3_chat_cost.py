"""A chat's cost is one figure wherever it is read (money3, probed and sound): the sum of
the turns' own ``stats.cost`` as they streamed, the server's chat view paged to the end
(each page's ``costUsd``, as the page adds them up), and ``chat_cost`` over the store's
messages agree to the last decimal, tool loops and an aborted, billed turn included."""

from __future__ import annotations

from decimal import Decimal

from tests.server.support import Api
from turnstate.core import chat_cost


async def test_the_streamed_the_paged_and_the_stored_chat_cost_agree(api: Api) -> None:
    chat_id = await api.new_chat()
    streamed, ends = Decimal(0), []
    for turn in range(24):
        text = f"turn {turn}: tell me about the plan " * 8
        if turn % 5 == 4:
            text = "[[call:weather]] " + text
        if turn == 13:
            text = "[[call:weather]] [[rounds:30]] " + text  # past the iteration limit
        events = await api.turn(chat_id, text=text, provider="anthropic",
                                model="claude-sonnet-4-5", tools=["weather"])
        final = events[-1].data
        ends.append(final["type"])
        cost = final["stats"]["cost"]
        assert cost is not None, final
        streamed += Decimal(cost["total"])
    assert ends.count("turn_aborted") == 1 and ends[13] == "turn_aborted"
    paged, before = Decimal(0), None
    while True:
        query = f"?limit=7&before={before}" if before else "?limit=7"
        view = await api.json("GET", f"/api/chats/{chat_id}{query}")
        paged += Decimal(view["costUsd"] or 0)
        assert view["costUnknownTurns"] == 0
        before = view["older"]
        if before is None:
            break
    stored = chat_cost(await api.services.store.list_messages(chat_id))
    assert stored is not None
    assert streamed == paged == stored.total > 0
