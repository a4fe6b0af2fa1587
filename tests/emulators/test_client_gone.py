"""A client that goes away mid-stream is normal: the emulator logs nothing above DEBUG
and no traceback (emul7), also when an embedder serves ``emulator.app()`` in its own
aiohttp runner, whose handlers aiohttp does not cancel when the client leaves."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import pytest
from aiohttp import web

from turnstate.emulators import AnthropicEmulator, EmulatorBase, OpenAIResponsesEmulator

WORDS = "_".join(["word"] * 50_000)
"""An answer of 50,000 words: a stream of megabytes, more than the sockets buffer, so
the emulator is still writing when the client leaves."""

REQUESTS: dict[str, tuple[type[EmulatorBase], str, dict[str, object]]] = {
    "anthropic": (AnthropicEmulator, "/v1/messages", {
        "model": "claude-sonnet-4-5", "max_tokens": 100_000, "stream": True,
        "messages": [{"role": "user", "content": f"[[say:{WORDS}]]"}]}),
    "openai": (OpenAIResponsesEmulator, "/v1/responses", {
        "model": "gpt-4o", "stream": True, "input": f"[[say:{WORDS}]]"}),
}


@pytest.mark.parametrize("provider", sorted(REQUESTS))
async def test_a_client_gone_mid_stream_logs_no_traceback(
        provider: str, caplog: pytest.LogCaptureFixture) -> None:
    kind, path, body = REQUESTS[provider]
    emulator = kind()
    runner = web.AppRunner(emulator.app())  # the embedder's runner: no handler cancellation
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    caplog.set_level(logging.DEBUG)
    # aiohttp logs the access once the handler has returned (or its error if it raised).
    answered = asyncio.Event()
    waiter = _OnRecord(answered)
    logging.getLogger("aiohttp").addHandler(waiter)
    try:
        async with aiohttp.ClientSession() as session:
            response = await session.post(f"http://127.0.0.1:{port}{path}", json=body,
                                          headers={"x-api-key": "k", "authorization": "Bearer k",
                                                   "anthropic-version": "2023-06-01"})
            assert response.status == 200
            await response.content.readline()
            response.close()  # gone mid-stream
        await asyncio.wait_for(answered.wait(), 10)
    finally:
        logging.getLogger("aiohttp").removeHandler(waiter)
        await runner.cleanup()
    loud = [r for r in caplog.records
            if r.exc_info or (r.levelno > logging.DEBUG and r.name != "aiohttp.access")]
    assert not loud, [(r.levelname, r.name, r.getMessage()) for r in loud]
    assert any(r.name == "turnstate" and "went away" in r.getMessage()
               for r in caplog.records)


class _OnRecord(logging.Handler):
    """Sets ``event`` on aiohttp's access line or its server error."""

    def __init__(self, event: asyncio.Event) -> None:
        super().__init__(logging.DEBUG)
        self.event = event

    def emit(self, record: logging.LogRecord) -> None:
        if record.name in ("aiohttp.access", "aiohttp.server"):
            self.event.set()
