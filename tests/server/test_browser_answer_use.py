"""What a user does with an answer and the composer: copy the whole answer (only code
blocks had a Copy), type the next message without clicking back into the field (Send
left the focus nowhere), read right-to-left text laid out right to left (Hebrew and
Arabic showed left to right), and find the message field by its name."""

from __future__ import annotations

from typing import Any

from tests.server import test_browser
from tests.server.test_browser import Page
from tests.server.test_process import ServeProcess

pytestmark = test_browser.pytestmark
served = test_browser.served
browser = test_browser.browser
HEBREW = "שלום עולם, מה שלומך?"


async def test_send_keeps_the_focus_in_the_message_field(
        served: ServeProcess, browser: Any) -> None:
    page = Page(await (await browser.new_context()).new_page())
    await page.open(served.url, "token=alice-token")
    await page.settings("openai", "gpt-4o")
    field = page.page.get_by_role("textbox", name="Message")
    assert await field.count() == 1  # named for a screen reader, not by its placeholder
    await page.send("hello")  # Send clicked with the mouse
    assert await page.page.evaluate("document.activeElement.id") == "text"


async def test_an_answer_is_copied_whole(served: ServeProcess, browser: Any) -> None:
    context = await browser.new_context()
    await context.grant_permissions(["clipboard-read", "clipboard-write"],
                                    origin=served.url.rstrip("/"))
    page = Page(await context.new_page())
    await page.open(served.url, "token=alice-token")
    await page.settings("openai", "gpt-4o")
    answer = await page.send("copy me")
    await answer.get_by_role("button", name="Copy").click()
    await answer.get_by_role("button", name="Copied").wait_for()
    stored = await answer.locator(".md").inner_text()
    assert await page.page.evaluate("navigator.clipboard.readText()") == stored.strip()


async def test_right_to_left_text_is_laid_out_right_to_left(
        served: ServeProcess, browser: Any) -> None:
    page = Page(await (await browser.new_context()).new_page())
    await page.open(served.url, "token=alice-token")
    await page.settings("openai", "gpt-4o")
    await page.page.fill("#text", HEBREW)
    assert await page.page.locator("#text").evaluate(
        "n => getComputedStyle(n).direction") == "rtl"
    await page.send(HEBREW)
    direction = "n => getComputedStyle(n).direction"
    assert await page.page.locator(".msg.user .text").last.evaluate(direction) == "rtl"
    assert await page.page.locator(".chat-item .title").first.evaluate(direction) == "rtl"
    assert await page.page.locator("#chat-title").evaluate(direction) == "rtl"


async def test_a_streaming_answer_is_busy_for_screen_readers_until_it_ends(
        served: ServeProcess, browser: Any) -> None:
    """Without ``aria-busy`` a screen reader read every re-rendered frame of a streaming
    answer when the message list was a live region; it is none now (the finished answer
    is announced once, ``test_page8_announce.py``), and the answer still says it is busy."""
    page = Page(await (await browser.new_context()).new_page())
    await page.open(served.url, "token=alice-token")
    await page.settings("openai", "gpt-4o")
    await page.page.evaluate("""() => { window.busyOnce = false;
      new MutationObserver(() => { if (document.querySelector(
        '.msg.assistant.streaming[aria-busy=true]')) window.busyOnce = true; })
        .observe(document.getElementById('messages'), {subtree: true, childList: true,
                                                       attributes: true}); }""")
    await page.send("hello")
    assert await page.page.evaluate("window.busyOnce")
    assert await page.page.locator("#messages [aria-busy=true]").count() == 0
