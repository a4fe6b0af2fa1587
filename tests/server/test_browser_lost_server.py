"""The page when its server goes away mid-answer, and when the user leaves a chat whose
answer streams, in headless chromium against real ``turnstate serve`` processes.

A server killed mid-answer and started again on the same port and database: the page
reconnects to the turn (from the log's start when the log lost the tail it saw) and ends
on the stored outcome, never on a live answer that streams forever. A server stopped
(SIGTERM) mid-answer: the answer says at once that it was cancelled, and the stored view
replaces it once the server is back. Leaving a streaming chat frees the composer there.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest_asyncio

from tests.server.test_browser import Page, browser  # noqa: F401
from tests.server.test_process import ServeProcess, start_serve

HANG = {"provider": "openai", "kind": "hang", "after_events": 9}
STREAMING_TEXT = ("() => { const n = document.querySelector('.msg.assistant.streaming "
                  ".md'); return n && n.textContent.trim().length > 0; }")
SETTLED = ("() => !document.querySelector('.msg.streaming') && "
           "!document.querySelector('#send').disabled")
TIMEOUT_MS = 40_000


class Server:
    """One database served by successive ``serve`` processes on one port."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.process: ServeProcess | None = None

    async def start(self, *extra: str) -> ServeProcess:
        port = () if self.process is None else ("--port", self.url.rsplit(":", 1)[1].strip("/"))
        self.process = await start_serve(self.tmp, "--tokens", str(self.tmp / "tokens"),
                                         "--lease-seconds", "2", *extra, *port)
        return self.process

    @property
    def url(self) -> str:
        assert self.process is not None
        return self.process.url


@pytest_asyncio.fixture(loop_scope="session")  # the browser's loop
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    (tmp_path / "tokens").write_text("alice: alice-token\n")
    server = Server(tmp_path)
    await server.start()
    try:
        yield server
    finally:
        assert server.process is not None
        if server.process.proc.returncode is None:
            assert await server.process.stop() == 0


async def _answering(server: Server, browser: Any) -> tuple[Page, list[str]]:  # noqa: F811
    """A page whose second answer streams and then hangs at the emulator."""
    page = Page(await (await browser.new_context()).new_page())
    page.page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.page.on("pageerror", lambda error: errors.append(str(error)))
    await page.open(server.url, "token=alice-token")
    await page.settings("openai", "gpt-4o")
    await page.send("hello")
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer alice-token"}) as http:
        assert (await http.post(server.url + "api/emulator/faults", json=HANG)).status == 200
    await page.page.fill("#text", "Tell me a long story")
    await page.page.click("#send")
    await page.page.wait_for_function(STREAMING_TEXT)
    return page, errors


async def test_a_server_killed_mid_answer_and_started_again_ends_the_answer(
        server: Server, browser: Any) -> None:  # noqa: F811
    page, errors = await _answering(server, browser)
    assert server.process is not None
    server.process.proc.kill()  # no goodbye: the stream breaks, the lease stays behind
    await server.process.proc.wait()
    await page.page.locator(".toast", has_text="Reconnecting").wait_for()
    await server.start()
    # The page reconnects, follows the dead node's turn until its lease runs out, and
    # shows the stored outcome with Retry; it never streams forever.
    await page.page.wait_for_function(SETTLED)
    answer = page.page.locator(".msg.assistant").last
    assert "ran out of time" in await answer.locator(".abort").inner_text()
    assert await answer.locator(".retry").count() == 1
    assert not errors
    retried = await page.send("And a short one")
    assert "You said: And a short one" in await retried.inner_text()


async def test_a_server_stopped_mid_answer_says_so_and_the_page_recovers(
        server: Server, browser: Any) -> None:  # noqa: F811
    page, errors = await _answering(server, browser)
    assert server.process is not None
    assert await server.process.stop() == 0  # SIGTERM: the turn ends cancelled
    answer = page.page.locator(".msg.assistant").last
    await answer.locator(".abort", has_text="cancelled").wait_for()  # while it is down
    await server.start()
    await page.page.wait_for_function(SETTLED)
    await page.page.locator(".msg.assistant.aborted .retry").wait_for()  # the stored view
    assert not errors
    assert "You said: Back" in await (await page.send("Back")).inner_text()


async def test_leaving_a_streaming_chat_frees_the_composer_and_coming_back_resumes(
        server: Server, browser: Any) -> None:  # noqa: F811
    page, errors = await _answering(server, browser)
    streaming = re.search(r"chat=(\w+)", page.page.url)
    assert streaming is not None
    await page.page.click("#new-chat")
    await page.page.wait_for_function(SETTLED)
    assert await page.page.locator("#stop").is_hidden()
    assert "You said: Elsewhere" in await (await page.send("Elsewhere")).inner_text()
    # Back in the first chat its answer streams on, with a working Stop.
    await page.page.click(f".chat-item[data-chat='{streaming.group(1)}']")
    await page.page.wait_for_function(STREAMING_TEXT)
    await page.page.click("#stop")
    await page.page.wait_for_function(SETTLED)
    assert "stopped on request" in await page.page.locator(".msg.assistant").last.inner_text()
    assert not errors
