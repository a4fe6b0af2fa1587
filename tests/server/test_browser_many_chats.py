"""An owner with more than a hundred chats: the list pages in all of them, once each,
and renaming one deep in the list keeps it where it is."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.server import test_browser
from tests.server.test_browser import Page
from tests.server.test_process import ServeProcess

pytestmark = test_browser.pytestmark
served = test_browser.served
browser = test_browser.browser
CHATS = 105


async def test_a_hundred_chats_page_in_and_a_deep_one_is_renamed_in_place(
        served: ServeProcess, browser: Any) -> None:
    ids = []
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer alice-token"}) as http:
        for n in range(CHATS):
            async with http.post(served.url + "api/chats") as made:
                chat = (await made.json())["id"]
            async with http.patch(f"{served.url}api/chats/{chat}",
                                  json={"title": f"chat {n:03}"}) as renamed:
                assert renamed.status == 200
            ids.append(chat)
    page = Page(await (await browser.new_context()).new_page())
    await page.open(served.url, "token=alice-token")
    items = page.page.locator(".chat-item")
    assert await items.count() == 20
    while not await page.page.locator("#more-chats").is_hidden():
        shown = await items.count()
        await page.page.click("#more-chats")
        await page.page.wait_for_function(
            "n => document.querySelectorAll('.chat-item').length > n", arg=shown)
    titles = await page.page.locator(".chat-item .title").all_inner_texts()
    assert titles == [f"chat {n:03}" for n in reversed(range(CHATS))]  # newest first, once
    await page.page.locator(".chat-item", has_text="chat 003").click()
    await page.page.locator("#chat-title", has_text="chat 003").wait_for()
    await page.page.click("#rename-chat")
    await page.page.locator("#rename-input").fill("the old one")
    await page.page.keyboard.press("Enter")
    await page.page.locator(".chat-item.active .title", has_text="the old one").wait_for()
    assert await items.count() == CHATS  # the pages loaded stay, the chat where it was
    assert (await page.page.locator(".chat-item .title").all_inner_texts())[CHATS - 4] == \
        "the old one"
