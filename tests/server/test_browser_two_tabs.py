"""Two tabs on one chat, in headless chromium: a question sent from the tab that did not
start the running turn is refused (``409 chat_busy``), and that tab then showed the
turn's stored in-progress answer as an empty, finished-looking bubble with a Regenerate
button, which never filled in. It now follows the running turn (as after a reload), with
a working Stop, and keeps the refused question in the composer."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.server.test_browser import Page, browser, served  # noqa: F401
from tests.server.test_process import ServeProcess

HANG = {"provider": "openai", "kind": "hang", "after_events": 9}
STREAMING_TEXT = ("() => { const n = document.querySelector('.msg.assistant.streaming "
                  ".md'); return n && n.textContent.trim().length > 0; }")
SETTLED = ("() => !document.querySelector('.msg.streaming') && "
           "!document.querySelector('#send').disabled")


async def test_a_question_refused_as_busy_follows_the_other_tabs_turn(
        served: ServeProcess, browser: Any) -> None:  # noqa: F811
    first = Page(await (await browser.new_context()).new_page())
    await first.open(served.url, "token=alice-token")
    await first.settings("openai", "gpt-4o")
    await first.send("hello")
    chat = first.page.url.split("chat=")[1]
    other = Page(await (await browser.new_context()).new_page())
    await other.open(served.url, f"token=alice-token&chat={chat}")
    await other.settings("openai", "gpt-4o")
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer alice-token"}) as http:
        assert (await http.post(served.url + "api/emulator/faults", json=HANG)).status == 200
    await first.page.fill("#text", "Tell me a long story")
    await first.page.click("#send")
    await first.page.wait_for_function(STREAMING_TEXT)

    await other.page.fill("#text", "And me?")
    await other.page.click("#send")
    await other.toast("Another turn is still running")
    await other.page.wait_for_function(STREAMING_TEXT)  # the other tab's answer, live
    assert await other.page.input_value("#text") == "And me?"
    assert await other.page.locator(".msg.assistant .regenerate").count() == 1  # hello's
    await other.page.click("#stop")
    for page in (other, first):
        await page.page.wait_for_function(SETTLED)
        answer = page.page.locator(".msg.assistant").last
        assert await answer.locator(".abort-reason").inner_text() == (
            "Aborted: stopped on request; the text so far is kept")  # said once
    await other.page.fill("#text", "")
    assert "You said: And me?" in await (await other.send("And me?")).inner_text()
