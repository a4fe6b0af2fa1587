"""Reading a long chat with the keyboard alone: the message list scrolls, but holds
buttons (Edit, Copy, Regenerate), so chromium did not make it a focus stop of its own,
and Tab jumped from button to button past the text between them: Page Up and the arrows
never reached the list. It is now a focus stop (a labelled region) that scrolls by keys."""

from __future__ import annotations

from typing import Any

from tests.server.test_browser import Page, browser, served  # noqa: F401
from tests.server.test_process import ServeProcess


async def test_the_message_list_takes_focus_and_scrolls_by_keys(
        served: ServeProcess, browser: Any) -> None:  # noqa: F811
    page = Page(await (await browser.new_context(viewport={"width": 1000, "height": 700}))
                .new_page())
    await page.open(served.url, "token=alice-token")
    await page.settings("openai", "gpt-4o")
    for i in range(2):
        await page.send(f"[[say:{'A_long_answer_to_read_line_by_line._' * 150}]] {i}")
    bottom = await page.page.evaluate("() => document.querySelector('#messages').scrollTop")
    assert bottom > 500
    reached = False
    for _ in range(30):
        await page.page.keyboard.press("Tab")
        if await page.page.evaluate("() => document.activeElement.id === 'messages'"):
            reached = True
            break
    assert reached, "Tab never stopped on the message list"
    await page.page.keyboard.press("PageUp")
    await page.page.wait_for_function(
        f"() => document.querySelector('#messages').scrollTop < {bottom} - 100")
