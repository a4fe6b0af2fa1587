"""An upstream that drips: a response head, or an error body, one byte at a time a little
faster than the idle timeout, forever. Each wait for a byte is short, so only a total
bound can end it: the attempt's ``max_stream_seconds`` (from its request sent) bounds the
head and an error body as it bounds an event stream. Small limits: no test waits long."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import pytest
from aiohttp import web

from tests.engine.support import FakeClock, collect, make_turn
from tests.faults.hostile import _loopback
from tests.faults.rig import quick_transport
from turnstate.core._errors import ProviderError, StreamLimitExceeded
from turnstate.emulators._emulated import kind_of
from turnstate.engine import TurnEngine
from turnstate.providers import HttpRequest, StreamLimits
from turnstate.providers._transport import RetryPolicy
from turnstate.storage import MemoryStore

MODELS = {"openai": "gpt-4o", "gemini": "gemini-2.5-flash", "openai-compatible": "gpt-4o-mini",
          "deepseek": "deepseek-chat", "anthropic": "claude-sonnet-4-5"}
LIMIT = 0.3  # max_stream_seconds
DRIP = 0.02  # seconds between the server's bytes; the idle timeout is 5 s
GUARD = 5.0  # a test that is not ended by the limit fails here


async def error_body_drip(request: web.Request, status: int = 500) -> web.StreamResponse:
    """An error head, then its body one byte at a time, forever."""
    await request.read()
    response = web.StreamResponse(status=status, headers={"Content-Type": "application/json"})
    await response.prepare(request)
    while True:
        await response.write(b" ")
        await asyncio.sleep(DRIP)


async def json_200_drip(request: web.Request) -> web.StreamResponse:
    """A 200 JSON body (a relay's error sent with 200) that never ends."""
    return await error_body_drip(request, 200)


async def head_drip(request: web.Request) -> web.StreamResponse:
    """A status line, then one header line after another, forever (no blank line)."""
    await request.read()
    transport = request.transport
    assert transport is not None
    transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
    while not transport.is_closing():  # forever, for the client (the server's end stops)
        transport.write(b"X-Drip: 1\r\n")
        await asyncio.sleep(DRIP)
    return web.Response()


DRIPS: dict[str, Callable[[web.Request], Awaitable[web.StreamResponse]]] = {
    "the error body": error_body_drip, "the error body ": json_200_drip,
    "the response head": head_drip}


@pytest.mark.parametrize("provider", sorted(MODELS))
@pytest.mark.parametrize("drip", sorted(DRIPS))
async def test_a_dripping_answer_aborts_the_turn_at_max_stream_seconds(
        provider: str, drip: str) -> None:
    store = MemoryStore(clock=FakeClock())
    chat = await store.create_chat(owner="drips")
    limits = StreamLimits(max_stream_seconds=LIMIT)
    async with _loopback(DRIPS[drip]) as base_url, \
            quick_transport(limits=limits, idle_timeout=GUARD) as transport:
        adapter = kind_of(provider).adapter(base_url=base_url, api_key="hostile-test-key")
        engine = TurnEngine(store, {provider: adapter}, transport, clock=FakeClock())
        turn = make_turn("hi", provider=provider, model=MODELS[provider])
        outcome = await asyncio.wait_for(collect(engine.run_turn(chat.id, turn)), GUARD)
    final = outcome.final
    assert final.type == "turn_aborted" and final.reason == "provider_failed"
    assert f"max_stream_seconds exceeded: {drip.strip()} took longer" in (final.detail or "")
    assert (await store.load_chat(chat.id)).active_turn_id is None  # the lease released
    assert "in_progress" not in [m.status.value for m in await store.list_messages(chat.id)]


async def test_a_dripping_error_body_is_not_retried() -> None:
    """The limit is no transient failure: the attempt is not made again."""
    attempts: list[int] = []

    async def counted(request: web.Request) -> web.StreamResponse:
        attempts.append(1)
        return await error_body_drip(request)

    def classify(status: int, headers: Mapping[str, str], body: bytes) -> ProviderError:
        raise AssertionError("no body may reach the classifier")

    async with _loopback(counted) as base_url, quick_transport(
            limits=StreamLimits(max_stream_seconds=LIMIT), idle_timeout=GUARD,
            retry=RetryPolicy(max_attempts=3)) as transport:
        request = HttpRequest(method="POST", url=base_url + "/v1/x", body=b"{}", provider="t",
                              headers={"content-type": "application/json"})
        with pytest.raises(StreamLimitExceeded) as caught:
            await asyncio.wait_for(_drain(transport.stream(request, classify)), GUARD)
    assert caught.value.limit == "max_stream_seconds" and attempts == [1]


async def _drain(stream: AsyncIterator[object]) -> None:
    async for _ in stream:
        pass


async def test_a_callers_cancel_while_the_head_is_awaited_stays_a_cancel() -> None:
    """The head watch takes back only its own cancellation."""
    asked, released = asyncio.Event(), asyncio.Event()

    async def never_answers(request: web.Request) -> web.StreamResponse:
        await request.read()
        asked.set()
        await released.wait()  # until the test is done with it
        return web.Response()

    async with _loopback(never_answers) as base_url, quick_transport(
            limits=StreamLimits(max_stream_seconds=GUARD), idle_timeout=GUARD) as transport:
        request = HttpRequest(method="POST", url=base_url + "/v1/x", body=b"{}", provider="t",
                              headers={"content-type": "application/json"})
        task = asyncio.ensure_future(_drain(transport.stream(request, _no_classify)))
        await asyncio.wait_for(asked.wait(), GUARD)  # the request is in: its head awaited
        assert transport._watch is not None and transport._watch.waiting
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert [w.task for w in transport._watch.waiting] == [None]
        released.set()


async def test_the_head_watch_keeps_no_finished_wait() -> None:
    async def answer(request: web.Request) -> web.StreamResponse:
        await request.read()
        return web.Response(status=400, text='{"error": {"message": "no"}}',
                            content_type="application/json")

    async with _loopback(answer) as base_url, quick_transport(idle_timeout=GUARD) as transport:
        request = HttpRequest(method="POST", url=base_url + "/v1/x", body=b"{}", provider="t",
                              headers={"content-type": "application/json"})
        for _ in range(20):
            with pytest.raises(ProviderError):
                await _drain(transport.stream(request, _status_only))
        watch = transport._watch
        assert watch is not None and len(watch.waiting) <= 1
        assert all(wait.task is None and not wait.expired for wait in watch.waiting)


def _no_classify(status: int, headers: Mapping[str, str], body: bytes) -> ProviderError:
    raise AssertionError("no answer may reach the classifier")


def _status_only(status: int, headers: Mapping[str, str], body: bytes) -> ProviderError:
    return ProviderError("t", f"HTTP {status}", status=status)
