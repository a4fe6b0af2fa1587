"""Two of a header that holds one value are refused, not read by their first (hostile12).

``Idempotency-Key`` holds one key. A request carrying two (a client library's own,
minted anew for each attempt, beside the application's stable one) was read by its
first: the application's retry, its library's key new, ran the turn a second time (a
second provider request billed) though the key the application meant was the same.
Two ``Last-Event-ID`` headers were read by the first as well. Both are a 400 naming the
header now, as two ``Authorization`` headers are a 401; nothing runs.
"""

from __future__ import annotations

from multidict import CIMultiDict

from tests.server.support import Api, turn_body


def _headers(api: Api, name: str, *values: str) -> CIMultiDict[str]:
    headers = CIMultiDict(api.headers())
    for value in values:
        headers.add(name, value)
    return headers


async def test_two_idempotency_keys_are_refused_and_run_nothing(api: Api) -> None:
    chat = await api.new_chat()
    for library_key in ("lib-attempt-1", "lib-attempt-2"):  # an application's retry
        response = await api.client.post(
            f"/api/chats/{chat}/turns", json=turn_body("hi"),
            headers=_headers(api, "Idempotency-Key", library_key, "app-key-1"))
        assert response.status == 400, await response.text()
        assert (await response.json())["field"] == "Idempotency-Key"
    view = await api.json("GET", f"/api/chats/{chat}")
    assert view["messages"] == []  # before, two turns: two questions, two answers
    response = await api.client.post(f"/api/chats/{chat}/turns", json=turn_body("hi"),
                                     headers=_headers(api, "Idempotency-Key", "app-key-1"))
    assert response.status == 200 and "turn_completed" in await response.text()


async def test_two_last_event_ids_are_refused(api: Api) -> None:
    chat = await api.new_chat()
    response = await api.call("POST", f"/api/chats/{chat}/turns", json=turn_body("hi"))
    await response.read()
    turn = response.headers["X-Turn-Id"]
    path = f"/api/chats/{chat}/turns/{turn}/events"
    response = await api.client.get(path, headers=_headers(api, "Last-Event-ID", "0", "2"))
    assert response.status == 400, await response.text()
    assert (await response.json())["field"] == "Last-Event-ID"
    response = await api.client.get(path, headers=_headers(api, "Last-Event-ID", "2"))
    assert response.status == 200 and "turn_completed" in await response.text()
