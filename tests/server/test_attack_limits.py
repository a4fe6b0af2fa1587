"""One owner cannot hold the whole node: open streams and running turns are bounded per
owner (429 with Retry-After), and what one owner holds never refuses another."""

from __future__ import annotations

import asyncio

import pytest

from tests.server.support import Api, turn_body
from tests.server.test_resume import read_until, resume, start
from turnstate.emulators._base import Fault
from turnstate.server import ServerConfig

LIMITED = ServerConfig(max_body_bytes=64 * 1024, max_text_chars=2_000,
                       max_streams_per_owner=3, max_turns_per_owner=2)

UI_BODY = {"messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}],
           "provider": "openai", "model": "gpt-4o"}


async def _refused(api: Api, method: str, path: str, error: str, **kwargs: object) -> None:
    response = await api.call(method, path, **kwargs)  # type: ignore[arg-type]
    assert response.status == 429, await response.text()
    assert response.headers["Retry-After"] == "2"
    assert (await response.json())["error"] == error


async def _status_before_the_body(api: Api, path: str) -> int:
    """The status of a POST whose body never comes (its headers alone are sent)."""
    reader, writer = await asyncio.open_connection(api.client.host, api.client.port)
    writer.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alice-token"
                 "\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
                 .encode())
    async with asyncio.timeout(5):  # the body timeout is 15 s: the answer came before it
        head = await reader.readuntil(b"\r\n\r\n")
    writer.close()
    return int(head.split()[1])


@pytest.mark.parametrize("config", [LIMITED])
async def test_an_owner_holds_at_most_its_streams_and_others_are_not_refused(
        api: Api) -> None:
    chat_id = await api.new_chat()
    gate = asyncio.Event()
    response, turn_id = await start(api, chat_id, Fault(gate=gate))  # stream 1
    await read_until(response, "state_changed")
    events = f"/api/chats/{chat_id}/turns/{turn_id}/events"
    held = [await resume(api, chat_id, turn_id)]  # stream 2
    before = set(api.services.turn_tasks)
    held.append(await resume(api, chat_id, turn_id))  # stream 3
    (last,) = api.services.turn_tasks - before  # its handler's task
    await _refused(api, "GET", events, "too_many_streams")
    await _refused(api, "GET", f"/api/ui-messages/{chat_id}/stream", "too_many_streams")
    other = await api.new_chat()
    await _refused(api, "POST", f"/api/chats/{other}/turns", "too_many_streams",
                   json=turn_body())
    await _refused(api, "POST", "/api/ui-messages", "too_many_streams",
                   json={**UI_BODY, "id": other})
    assert await api.services.store.list_turns(other) == ()  # nothing was started
    for path in (f"/api/chats/{other}/turns", "/api/ui-messages"):  # nor a body awaited
        assert await _status_before_the_body(api, path) == 429
    bob = await api.new_chat("bob")
    assert (await api.turn(bob, owner="bob"))[-1].event == "turn_completed"
    held.pop().close()  # a stream that ends gives its place back
    await asyncio.wait([last], timeout=10)  # its handler saw the client leave
    assert api.services.limits.streams == {"alice": 2}
    again = await resume(api, chat_id, turn_id)
    gate.set()
    for stream in (response, *held, again):
        await stream.text()
    assert api.services.limits.streams == {}


@pytest.mark.parametrize("config", [LIMITED])
async def test_an_owner_runs_at_most_its_turns_even_with_their_clients_gone(
        api: Api) -> None:
    gates = [asyncio.Event(), asyncio.Event()]
    for gate in gates:  # each started, its client gone: the turn runs on
        response, _ = await start(api, await api.new_chat(), Fault(gate=gate))
        await read_until(response, "state_changed")
        response.close()
    third = await api.new_chat()
    await _refused(api, "POST", f"/api/chats/{third}/turns", "too_many_turns",
                   json=turn_body())
    await _refused(api, "POST", "/api/ui-messages", "too_many_turns",
                   json={**UI_BODY, "id": third})
    assert await api.services.store.list_turns(third) == ()
    bob = await api.new_chat("bob")
    assert (await api.turn(bob, owner="bob"))[-1].event == "turn_completed"
    for gate in gates:
        gate.set()
    await api.services.engine.detached.settled()
    assert api.services.limits.turns == {}
    assert (await api.turn(third))[-1].event == "turn_completed"


@pytest.mark.parametrize("config", [LIMITED])
async def test_a_turn_that_does_not_start_is_not_counted(api: Api) -> None:
    missing = "0" * 32
    for _ in range(3):  # more than the limit: each refusal gave its count back
        response = await api.call("POST", f"/api/chats/{missing}/turns", json=turn_body())
        assert response.status == 404
    assert api.services.limits.turns == {} and api.services.limits.streams == {}
