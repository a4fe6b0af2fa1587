"""A running turn the server will not stream to the page (the owner's streams are all
open: 429): the page said nothing and asked again at once, in a loop of a hundred
requests a second, for as long as the turn ran. It now says why and asks again after
the server's ``Retry-After``, and shows the stored answer once the turn has ended."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest_asyncio

from tests.server import test_browser
from tests.server.test_browser import Page
from tests.server.test_process import ServeProcess, start_serve

pytestmark = test_browser.pytestmark
browser = test_browser.browser
AUTH = {"Authorization": "Bearer alice-token"}


@pytest_asyncio.fixture(loop_scope="session")  # the browser's loop
async def served(tmp_path: Path) -> AsyncIterator[ServeProcess]:
    (tmp_path / "tokens").write_text("alice: alice-token\n")
    process = await start_serve(tmp_path, "--tokens", str(tmp_path / "tokens"),
                                "--max-streams-per-owner", "1")
    try:
        yield process
    finally:
        assert await process.stop() == 0


async def test_a_refused_resume_is_said_and_asked_again_later_not_in_a_loop(
        served: ServeProcess, browser: Any) -> None:
    async with aiohttp.ClientSession(served.url, headers=AUTH) as http:
        chat = (await (await http.post("/api/chats")).json())["id"]
        stall = {"provider": "openai", "kind": "stall", "seconds": 300}
        assert (await http.post("/api/emulator/faults", json=stall)).status == 200
        turn = await http.post(f"/api/chats/{chat}/turns", json={
            "provider": "openai", "model": "gpt-4o", "text": "a stalled question"})
        assert turn.status == 200  # its stream holds the owner's one place
        turn_id = turn.headers["X-Turn-Id"]
        page = Page(await (await browser.new_context()).new_page())
        streams: list[int] = []
        page.page.on("response", lambda r: streams.append(r.status)
                     if r.url.split("?")[0].endswith("/events") else None)
        await page.page.goto(f"{served.url}#token=alice-token&chat={chat}")
        await page.toast("Cannot show the running answer")
        assert "streams may be open" in await page.page.locator(".toast").first.inner_text()
        await page.page.locator("#send:not([disabled])").wait_for()
        assert streams and set(streams) == {429}
        assert len(streams) <= 2, streams  # not asked again and again
        # the turn ends (stopped), its stream closes: the next try shows it stored
        stopped = await http.post(f"/api/chats/{chat}/turns/{turn_id}/stop")
        assert stopped.status == 202
        await turn.read()
        await page.page.wait_for_function(
            "() => document.querySelector('.msg.assistant .abort')?.textContent"
            ".includes('stopped on request')", timeout=60_000)
        assert len(streams) <= 10, streams
