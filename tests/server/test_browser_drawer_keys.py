"""The 390 px drawer with the keyboard alone: closed, its chats were still in the Tab
order (a keyboard user walked through every chat off screen, focus invisible); opened,
focus stayed on ☰ behind the scrim; Escape did not close it."""

from __future__ import annotations

from typing import Any

from tests.server import test_browser
from tests.server.test_browser import Page
from tests.server.test_process import ServeProcess

pytestmark = test_browser.pytestmark
served = test_browser.served
browser = test_browser.browser

FOCUSED = "document.activeElement && (document.activeElement.id || " \
          "document.activeElement.className)"


async def test_the_drawer_takes_the_keyboard_only_while_open(
        served: ServeProcess, browser: Any) -> None:
    page = Page(await (await browser.new_context(
        viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)).new_page())
    await page.open(served.url, "token=alice-token")
    await page.send("first chat")
    await page.page.evaluate("document.querySelector('#new-chat').click()")  # off screen
    await page.send("second chat")
    reachable = await page.page.evaluate("""() => {
        const item = document.querySelector('.chat-item');
        item.focus();
        return document.activeElement === item;
    }""")
    assert reachable is False  # closed: out of the Tab order
    await page.page.focus("#menu")
    await page.page.keyboard.press("Enter")
    await page.page.wait_for_function(
        "() => document.body.classList.contains('drawer-open')")
    assert "chat-item" in await page.page.evaluate(FOCUSED)  # the chat shown, in the list
    await page.page.keyboard.press("Escape")
    await page.page.wait_for_function(
        "() => !document.body.classList.contains('drawer-open')")
    assert await page.page.evaluate(FOCUSED) == "menu"
    await page.page.keyboard.press("Enter")
    await page.page.keyboard.press("Tab")  # the next chat down: the first one
    assert "first chat" in await page.page.evaluate("document.activeElement.textContent")
    await page.page.keyboard.press("Enter")
    await page.page.locator("#chat-title", has_text="first chat").wait_for()
    assert await page.page.evaluate(FOCUSED) == "text"
