"""The page renames chats (keyboard only, errors shown), and says what happened when the
owner has as many chats as the server keeps, without losing what was typed."""

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
MAX_CHATS = 2


@pytest_asyncio.fixture(loop_scope="session")  # the browser's loop
async def served(tmp_path: Path) -> AsyncIterator[ServeProcess]:
    (tmp_path / "tokens").write_text("alice: alice-token\nbob: bob-token\n")
    process = await start_serve(tmp_path, "--tokens", str(tmp_path / "tokens"),
                                "--max-chats-per-owner", str(MAX_CHATS))
    try:
        yield process
    finally:
        assert await process.stop() == 0


async def _page(browser: Any, served: ServeProcess, **context: Any) -> Page:
    page = Page(await (await browser.new_context(**context)).new_page())
    await page.open(served.url, "token=alice-token")
    return page


async def _title_in_list(page: Page) -> str:
    return str(await page.page.locator(".chat-item.active").inner_text())


async def test_a_chat_is_renamed_with_the_keyboard_alone(
        served: ServeProcess, browser: Any) -> None:
    page = await _page(browser, served)
    await page.send("What is the weather in Lisbon in May?")
    assert await page.page.locator("#chat-title").inner_text() == \
        "What is the weather in Lisbon in May?"
    await page.page.focus("#rename-chat")
    await page.page.keyboard.press("Enter")
    field = page.page.locator("#rename-input")
    await field.wait_for()
    assert await page.page.evaluate("document.activeElement.id") == "rename-input"
    await page.page.keyboard.type("Lisbon trip")  # the old title was selected: replaced
    await page.page.keyboard.press("Enter")
    await page.page.locator("#chat-title", has_text="Lisbon trip").wait_for()
    await page.page.wait_for_function(
        "() => document.querySelector('.chat-item.active').textContent.includes('Lisbon trip')")
    assert await page.page.evaluate("document.activeElement.id") == "rename-chat"
    # Escape cancels (and does not count as a rename); the name outlives a reload
    await page.page.keyboard.press("Enter")
    await page.page.keyboard.type("never saved")
    await page.page.keyboard.press("Escape")
    assert await page.page.locator("#chat-title").inner_text() == "Lisbon trip"
    await page.page.reload()
    await page.page.wait_for_selector("body[data-ready=true]")
    assert await page.page.locator("#chat-title").inner_text() == "Lisbon trip"
    assert "Lisbon trip" in await _title_in_list(page)
    # emptied: the first message names the chat again
    await page.page.click("#rename-chat")
    await field.fill("")
    await page.page.keyboard.press("Enter")
    await page.page.locator("#chat-title", has_text="What is the weather").wait_for()


async def test_a_refused_title_says_why_and_keeps_the_field(
        served: ServeProcess, browser: Any) -> None:
    page = await _page(browser, served)
    await page.send("hello")
    await page.page.click("#rename-chat")
    await page.page.locator("#rename-input").fill("abc\u202egnp.exe")
    await page.page.keyboard.press("Enter")
    await page.toast("Could not rename")
    assert "U+202E" in await page.page.locator(".toast").first.inner_text()
    assert not await page.page.locator("#rename-form").is_hidden()
    assert await page.page.locator("#chat-title").inner_text() == "hello"


async def test_a_rename_at_390_px_fits(served: ServeProcess, browser: Any) -> None:
    page = await _page(browser, served, viewport={"width": 390, "height": 844},
                       is_mobile=True, has_touch=True)
    await page.send("a question asked on a phone, long enough to be cut in the header")
    await page.page.click("#rename-chat")
    box = await page.page.locator("#rename-input").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
    assert await page.page.evaluate("document.documentElement.scrollWidth") <= 390


async def test_one_chat_too_many_is_explained_and_the_text_kept(
        served: ServeProcess, browser: Any) -> None:
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer alice-token"}) as http:
        for _ in range(MAX_CHATS):
            async with http.post(served.url + "api/chats") as response:
                assert response.status == 201
    page = await _page(browser, served)
    await page.page.fill("#text", "my carefully typed question")
    await page.page.click("#send")
    await page.toast("delete one")
    shown = await page.page.locator(".toast").first.inner_text()
    assert "Connection lost" not in shown, shown
    assert await page.page.locator("#text").input_value() == "my carefully typed question"
    # Send comes back once the refused send settles, which ends after the toast shows.
    await page.page.locator("#send:enabled").wait_for()
