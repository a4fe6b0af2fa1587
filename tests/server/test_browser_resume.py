"""The page with turns that outlive their connection (issue 21), in headless chromium: a
reload mid-answer continues the answer, a second page shows the running turn with a
working Stop, the chat list marks the running chat, and Stop shows the stopped answer at
once and keeps its partial text (issue 25's defect 16)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from tests.server.test_browser import Page, browser, served  # noqa: F401
from tests.server.test_process import ServeProcess

HANG = {"provider": "openai", "kind": "hang", "after_events": 6}
STREAMING_TEXT = ("() => { const n = document.querySelector('.msg.assistant.streaming "
                  ".md'); return n && n.textContent.trim().length > 0; }")


async def test_reload_mid_answer_continues_and_stop_from_a_second_page_keeps_the_text(
        served: ServeProcess, browser: Any) -> None:  # noqa: F811
    page = Page(await (await browser.new_context()).new_page())
    await page.open(served.url, "token=alice-token")
    await page.settings("openai", "gpt-4o", prompt="You are terse.")
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer alice-token"}) as http:
        assert (await http.post(served.url + "api/emulator/faults", json=HANG)).status == 200
    await page.page.fill("#text", "Tell me a long story")
    await page.page.click("#send")
    await page.page.wait_for_function(STREAMING_TEXT)
    before = await page.page.locator(".msg.assistant.streaming").inner_text()

    # A reload: the answer continues from where it was, not an empty bubble; Stop works.
    await page.page.reload()
    await page.page.wait_for_selector("body[data-ready=true]")
    await page.page.wait_for_function(STREAMING_TEXT)
    assert await page.page.locator(".msg.assistant.streaming").inner_text() == before
    assert await page.page.locator("#stop").is_visible()
    assert await page.page.locator(".msg.user").count() == 1  # the question, once
    await page.page.locator(".chat-item.active .running").wait_for()

    # A second page (another browser) shows the running turn and stops it.
    chat_id = page.page.url.split("chat=")[1]
    other = Page(await (await browser.new_context()).new_page())
    await other.open(served.url, f"token=alice-token&chat={chat_id}")
    await other.page.wait_for_function(STREAMING_TEXT)
    # "At once" is before the server hears of the stop: the stop request is held here
    # while the live answer is read, else the stored answer may already have replaced it.
    held: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def hold(route: Any) -> None:
        held.set_result(route)

    await other.page.route("**/stop", hold)
    await other.page.click("#stop")
    stop_request = await held
    assert await other.page.locator(".msg.assistant.streaming .stop-note").count() == 1
    assert before in await other.page.locator(".msg.assistant").last.inner_text()
    await stop_request.continue_()

    # Both pages end on the stored answer: aborted, stopped, the partial text kept.
    for shown in (page, other):
        await shown.page.wait_for_function(
            "() => !document.querySelector('.msg.streaming') && "
            "document.querySelector('.msg.assistant.aborted') && "
            "!document.querySelector('#send').disabled")
        answer = shown.page.locator(".msg.assistant").last
        assert before.strip() in await answer.inner_text()
        assert "stopped on request" in await answer.locator(".abort").inner_text()
        assert await shown.page.locator("#stop").is_hidden()
    await page.page.locator(".chat-item.active .running").wait_for(state="detached")

    # The chat takes the next turn at once.
    answer = await page.send("And now a short one")
    assert "You said: And now a short one" in await answer.inner_text()
