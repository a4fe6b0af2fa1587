"""``bench_peers``' fairness: the order clients run in, and a fake server whose replies
cost it the same whatever the client asked (issue 26)."""

from __future__ import annotations

import collections
import itertools
import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from benchmarks import _fake_openai as fake

SYSTEM = "Be terse."


@pytest.mark.parametrize("count", [3, 4, 5])
def test_each_client_runs_after_each_other_client_equally_often(count: int) -> None:
    """Within its orders every client follows every other client the same number of
    times (the rotated order had one neighbour in all but one order of a cycle)."""
    bench_peers = pytest.importorskip("benchmarks.bench_peers")
    orders = [bench_peers.ordered(list(range(count)), turn) for turn in range(2 * count)]
    assert all(sorted(order) == list(range(count)) for order in orders)
    follows = collections.Counter(pair for order in orders for pair in itertools.pairwise(order))
    assert len(follows) == count * (count - 1)
    assert len(set(follows.values())) == 1, follows


@pytest.mark.parametrize("blocks", [False, True])
def test_a_round_asks_every_client_the_same_questions_in_either_shape(blocks: bool) -> None:
    """Turn by turn (the default) each of a round's ``BLOCK`` steps is one balanced order
    of all clients, all asked that step's question; with ``--blocks`` each client runs
    its ``BLOCK`` questions back to back, the clients in the round's balanced order."""
    bench_peers = pytest.importorskip("benchmarks.bench_peers")
    clients, block = list("abcde"), bench_peers.BLOCK
    for round_number in range(3):
        schedule = bench_peers.cursor_schedule(clients, round_number, blocks=blocks)
        questions = list(range(10 + round_number * block, 10 + (round_number + 1) * block))
        for client in clients:
            assert [index for name, index in schedule if name == client] == questions
        steps = [schedule[start:start + (block if blocks else len(clients))]
                 for start in range(0, len(schedule), block if blocks else len(clients))]
        if blocks:
            assert [step[0][0] for step in steps] == bench_peers.ordered(clients, round_number)
            assert all(len({name for name, _ in step}) == 1 for step in steps)
        else:
            assert [[name for name, _ in step] for step in steps] == [
                bench_peers.ordered(clients, index) for index in questions]


async def _client() -> TestClient[Any, Any]:
    client: TestClient[Any, Any] = TestClient(TestServer(fake.FakeOpenAI().app()))
    await client.start_server()
    return client


RESPONSES = {"model": "gpt-4o", "instructions": SYSTEM, "input": "hi"}
CHAT = {"model": "gpt-4o", "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}]}


async def test_the_replies_are_the_wire_shapes_with_this_request_s_ids() -> None:
    """A cached reply, filled in, is byte for byte what the event builders make for
    this request: its own ids, ``previous_response_id`` and token counts."""
    client = await _client()
    try:
        first = await client.post("/v1/responses", json=RESPONSES)
        body = await first.read()
        tokens = len(json.dumps(RESPONSES)) // 4 + 20
        assert body == json.dumps(fake._response(
            {**RESPONSES, "previous_response_id": None}, f"resp_{1:024x}", f"msg_{1:024x}",
            tokens, completed=True)).encode()
        previous = json.loads(body)["id"]
        streamed = {**RESPONSES, "stream": True, "previous_response_id": previous}
        reply = await (await client.post("/v1/responses", json=streamed)).read()
        tokens = len(json.dumps(streamed)) // 4 + 20
        assert reply == b"".join(fake._sse(event) for event in fake._response_events(
            streamed, f"resp_{2:024x}", f"msg_{2:024x}", tokens))
        chat = await (await client.post("/v1/chat/completions", json=CHAT)).read()
        tokens = len(json.dumps(CHAT)) // 4 + 20
        assert chat == b"".join(fake._chat_chunks(
            CHAT, f"chatcmpl-{3:024x}", tokens)) + b"data: [DONE]\n\n"
    finally:
        await client.close()


async def test_a_reply_costs_the_server_no_encoding_streamed_or_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the first reply of each shape the server encodes nothing but the previous
    id: a streamed reply (about fourteen events) costs it what a JSON one does, so no
    client's wall time carries more of the server's work (the old server encoded every
    event of every streamed reply)."""
    client = await _client()
    encoded: list[object] = []
    dumps = json.dumps

    def counted(value: object, **kwargs: Any) -> str:
        encoded.append(value)
        return dumps(value, **kwargs)

    try:
        for body in (RESPONSES, {**RESPONSES, "stream": True}):
            await (await client.post("/v1/responses", json=body)).read()
        await (await client.post("/v1/chat/completions", json=CHAT)).read()
        monkeypatch.setattr(fake.json, "dumps", counted)
        per_kind = []
        for body in (RESPONSES, {**RESPONSES, "stream": True}):
            encoded.clear()
            await (await client.post("/v1/responses", json=body)).read()
            per_kind.append(len(encoded))
        encoded.clear()
        await (await client.post("/v1/chat/completions", json=CHAT)).read()
        per_kind.append(len(encoded))
        assert per_kind == [0, 0, 0], per_kind
    finally:
        await client.close()
