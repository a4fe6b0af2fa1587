"""On a phone Enter makes a new line: a phone's keyboard has no Shift+Enter, so Enter
sending the message left no way to write a second line. Send (or Ctrl+Enter) sends;
with a mouse or trackpad Enter still sends."""

from __future__ import annotations

from typing import Any

from tests.server import test_browser
from tests.server.test_browser import Page
from tests.server.test_process import ServeProcess

pytestmark = test_browser.pytestmark
served = test_browser.served
browser = test_browser.browser
SENT = ("n => document.querySelectorAll('.msg.assistant:not(.streaming)').length === n "
        "&& !document.querySelector('#send').disabled")


async def test_enter_is_a_new_line_on_a_phone_and_send_sends(
        served: ServeProcess, browser: Any) -> None:
    context = await browser.new_context(viewport={"width": 375, "height": 700},
                                        is_mobile=True, has_touch=True)
    page = Page(await context.new_page())
    await page.open(served.url, "token=alice-token")
    await page.settings("openai", "gpt-4o")
    await page.page.focus("#text")
    await page.page.keyboard.type("first line")
    await page.page.keyboard.press("Enter")
    await page.page.keyboard.type("second line")
    assert await page.page.input_value("#text") == "first line\nsecond line"
    assert await page.page.locator(".msg").count() == 0  # nothing sent
    assert "Enter is a new line" in (await page.page.get_attribute("#text", "placeholder")
                                     or "")
    await page.page.tap("#send")
    await page.page.wait_for_function(SENT, arg=1)
    assert "first line\nsecond line" in await page.page.locator(".msg.user").inner_text()
    await page.page.focus("#text")
    await page.page.keyboard.type("third")
    await page.page.keyboard.press("Control+Enter")
    await page.page.wait_for_function(SENT, arg=2)


async def test_enter_sends_with_a_mouse(served: ServeProcess, browser: Any) -> None:
    page = Page(await (await browser.new_context()).new_page())
    await page.open(served.url, "token=alice-token")
    await page.settings("openai", "gpt-4o")
    await page.page.focus("#text")
    await page.page.keyboard.type("hello")
    await page.page.keyboard.press("Enter")
    await page.page.wait_for_function(SENT, arg=1)
    assert await page.page.input_value("#text") == ""
