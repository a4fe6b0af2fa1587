"""The turn stream's writes: a timer only for a write that can wait (issue 26), and a
stalled reader's connection aborted after the send timeout."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest
from aiohttp import web
from aiohttp.base_protocol import BaseProtocol
from aiohttp.http_writer import StreamWriter
from aiohttp.test_utils import TestClient, TestServer, make_mocked_request

from tests.server.support import Api, parse_sse, turn_body
from turnstate.server import _routes, _sse
from turnstate.server._sse import TurnStream


class CountingTimeouts:
    """``asyncio`` as ``_sse`` sees it, counting the timeouts it enters."""

    def __init__(self) -> None:
        self.entered = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    def timeout(self, delay: float | None) -> asyncio.Timeout:
        self.entered += 1
        return asyncio.timeout(delay)


@pytest.fixture
def timeouts(monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingTimeouts]:
    counting = CountingTimeouts()
    monkeypatch.setattr(_sse, "asyncio", counting)
    yield counting


def stream_app(chunks: Sequence[bytes], outcomes: list[str], done: asyncio.Event, *,
               send_timeout: float = _sse.SEND_TIMEOUT_SECONDS) -> web.Application:
    async def handler(request: web.Request) -> web.StreamResponse:
        sse = TurnStream(request, headers={}, heartbeat_seconds=60, send_timeout=send_timeout)
        try:
            await sse.open()
            for chunk in chunks:
                await sse.send(chunk)
            await sse.finish(b"data: end\n\n")
            outcomes.append("finished")
        except TimeoutError:
            outcomes.append("timed out")
            raise
        finally:
            sse.close()
            done.set()
        return sse

    app = web.Application()
    app.router.add_get("/stream", handler)
    return app


@contextlib.asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(app)) as client:
        yield client


async def test_writes_below_the_high_water_mark_set_no_timer(
        timeouts: CountingTimeouts) -> None:
    outcomes: list[str] = []
    done = asyncio.Event()
    async with serving(stream_app([b"data: one\n\n", b"data: two\n\n"], outcomes, done)) \
            as client:
        response = await client.get("/stream")
        assert await response.read() == b"data: one\n\ndata: two\n\ndata: end\n\n"
        await done.wait()
    assert outcomes == ["finished"]
    assert timeouts.entered == 0  # before: one per send and one for the end


async def test_a_reader_that_stops_reading_is_cut_after_the_send_timeout(
        timeouts: CountingTimeouts) -> None:
    outcomes: list[str] = []
    done = asyncio.Event()
    chunks = [b"x" * 2**20] * 256  # far more than the socket buffers hold
    app = stream_app(chunks, outcomes, done, send_timeout=0.3)
    async with serving(app) as client:
        server = client.server
        reader, writer = await asyncio.open_connection(server.host, server.port)
        writer.write(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")  # then never reads
        await done.wait()
        assert outcomes == ["timed out"]
        assert timeouts.entered >= 1
        with contextlib.suppress(ConnectionError):  # aborted: the rest is cut short
            while await reader.read(2**20):
                pass
        writer.close()


async def test_a_body_that_has_arrived_is_read_without_a_timer(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """The body timeout guards a body still on its way (``test_hardening``'s 408); a
    body that came with its headers is read at once, so it gets no timer (issue 26)."""
    counting = CountingTimeouts()
    monkeypatch.setattr(_routes, "asyncio", counting)
    chat_id = await api.new_chat()
    response = await api.call("POST", f"/api/chats/{chat_id}/turns", json=turn_body())
    events, _ = parse_sse((await response.read()).decode())
    assert events[-1].event == "turn_completed"
    assert counting.entered == 0  # before: one per request with a body


class _PausedTransport(asyncio.Transport):
    """A connection whose reader stalled: asyncio paused the protocol above the high-water
    mark, and the buffer has since drained to between the marks (asyncio resumes the
    protocol only at the low one), where it stays."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.aborted = False

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return (16 * 1024, 64 * 1024)  # asyncio's defaults

    def get_write_buffer_size(self) -> int:
        return 30 * 1024

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def is_closing(self) -> bool:
        return self.aborted

    def abort(self) -> None:
        self.aborted = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


async def _paused_stream() -> tuple[TurnStream, _PausedTransport]:
    loop = asyncio.get_running_loop()
    transport = _PausedTransport()
    protocol = BaseProtocol(loop)  # aiohttp's flow control, under the payload writer
    protocol.connection_made(transport)
    protocol.pause_writing()
    request = make_mocked_request("GET", "/stream", transport=transport,
                                  writer=StreamWriter(protocol, loop))
    sse = TurnStream(request, headers={}, heartbeat_seconds=60, send_timeout=0.05)
    await sse.open()
    return sse, transport


@pytest.mark.parametrize("step", ["send", "finish"])
async def test_a_write_to_a_paused_stream_keeps_its_timer(step: str) -> None:
    """Below the high-water mark is not enough for a write to go without a timer: a
    protocol paused above it stays paused until the buffer is down to the low one, and
    aiohttp's writer then waits to drain (``write_eof`` always, ``write`` every 64 KiB).
    With a stalled reader that wait never ends: the send timeout must still cut it (and
    ``finish`` has already handed the socket its kernel default timeout back)."""
    sse, transport = await _paused_stream()

    async def write() -> None:
        if step == "finish":
            await sse.finish(b"data: end\n\n")
        else:
            for _ in range(100):  # 100 KiB: past the writer's 64 KiB between drains
                await sse.send(b"x" * 1024)

    task = asyncio.ensure_future(write())
    done, _ = await asyncio.wait([task], timeout=10)  # a guard: on the old code it hangs
    if not done:
        task.cancel()
    assert done, f"{step} waited on a paused stream with no timer"
    with pytest.raises(TimeoutError):
        task.result()
    assert transport.aborted
