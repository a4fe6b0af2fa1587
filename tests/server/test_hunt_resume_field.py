"""A resume point beyond the turn's last event names the field the client sent it in.

docs/server.md: ``400 invalid_event_id`` names ``Last-Event-ID`` or ``after``; an id past
the end given in the header was reported as ``after``, a field the client never sent.
"""

from __future__ import annotations

from tests.server.support import Api


async def test_an_event_id_past_the_end_names_the_header_it_came_in(api: Api) -> None:
    chat = await api.new_chat()
    events = await api.turn(chat)
    path = f"/api/chats/{chat}/turns/{events[-1].data['turnId']}/events"
    past = str(len(events) + 5)
    by_header = await api.json("GET", path, status=400, headers={"Last-Event-ID": past})
    assert (by_header["error"], by_header["field"]) == ("invalid_event_id", "Last-Event-ID")
    assert by_header["message"].startswith(f"event {past} is beyond")
    by_query = await api.json("GET", f"{path}?after={past}", status=400)
    assert (by_query["error"], by_query["field"]) == ("invalid_event_id", "after")
