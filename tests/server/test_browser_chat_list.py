"""The chat list as a user of many chats meets it: a turn keeps the place they scrolled
to (the list went back to its first page after every turn), a search box finds a chat by
its title or first question, and a title cut off by the list's width is in a tooltip."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.server import test_browser
from tests.server.test_browser import Page
from tests.server.test_process import ServeProcess

pytestmark = test_browser.pytestmark
served = test_browser.served
browser = test_browser.browser
CHATS = 45
LONG = "a very long title that the list cuts off " * 3


async def _chats(served: ServeProcess) -> list[str]:
    """``CHATS`` chats titled "chat 000" to "chat 044" (the newest last), two of them
    named otherwise, and one whose first question (no title) mentions Lisbon."""
    ids = []
    auth = {"Authorization": "Bearer alice-token"}
    async with aiohttp.ClientSession(served.url, headers=auth) as http:
        for n in range(CHATS):
            chat = (await (await http.post("/api/chats")).json())["id"]
            title = {3: "Trip to LISBON", 40: LONG.strip()}.get(n, f"chat {n:03}")
            assert (await http.patch(f"/api/chats/{chat}", json={"title": title})).status == 200
            ids.append(chat)
        asked = (await (await http.post("/api/chats")).json())["id"]
        turn = await http.post(f"/api/chats/{asked}/turns", json={
            "provider": "openai", "model": "gpt-4o", "text": "weather in lisbon?"})
        assert turn.status == 200
        await turn.read()
    return ids


async def test_a_turn_keeps_the_list_where_the_user_scrolled(
        served: ServeProcess, browser: Any) -> None:
    await _chats(served)
    page = Page(await (await browser.new_context(viewport={"width": 1280, "height": 700}))
                .new_page())
    await page.open(served.url, "token=alice-token")
    items = page.page.locator(".chat-item")
    for shown in (20, 40):
        await page.page.click("#more-chats")
        await page.page.wait_for_function(
            "n => document.querySelectorAll('.chat-item').length > n", arg=shown)
    await page.page.locator(".chat-item", has_text="chat 002").click()
    await page.page.locator("#chat-title", has_text="chat 002").wait_for()
    scrolled = await page.page.evaluate(
        "() => { const l = document.getElementById('chat-list');"
        " l.scrollTop = l.scrollHeight; return l.scrollTop; }")
    assert scrolled > 0
    await page.settings("openai", "gpt-4o")
    await page.send("hello from deep in the list")
    assert await items.count() == CHATS + 1  # every chat loaded is still there
    assert await page.page.evaluate(
        "() => document.getElementById('chat-list').scrollTop") >= scrolled - 80
    assert await page.page.locator(".chat-item.active").inner_text() != ""
    assert await items.first.locator(".title").inner_text() == "chat 002"  # moved up


async def test_the_search_box_finds_titles_and_first_questions(
        served: ServeProcess, browser: Any) -> None:
    await _chats(served)
    page = Page(await (await browser.new_context()).new_page())
    await page.open(served.url, "token=alice-token")
    long_item = page.page.locator(".chat-item", has_text="a very long title")
    assert await long_item.get_attribute("title") == LONG.strip()  # the whole title
    search = page.page.get_by_role("searchbox", name="Search chats")
    await search.fill("lisbon")
    await page.page.wait_for_function(
        "() => document.querySelectorAll('.chat-item').length === 2")
    titles = await page.page.locator(".chat-item .title").all_inner_texts()
    assert titles == ["weather in lisbon?", "Trip to LISBON"]  # the older one past page 1
    assert await page.page.locator("#more-chats").is_hidden()
    await search.fill("no such words")
    await page.page.locator("#no-chats").wait_for()
    assert await page.page.locator(".chat-item").count() == 0
    await search.fill("")
    await page.page.wait_for_function(
        "() => document.querySelectorAll('.chat-item').length === 20")
    assert await page.page.locator("#no-chats").is_hidden()
