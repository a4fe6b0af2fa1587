"""Copy on a code block and on an answer: the button said "Copied" by changing its own
text, which a screen reader does not read out for the button it just pressed; nothing
said a copy had worked or failed. It is now also announced (the page's status region)."""

from __future__ import annotations

from typing import Any

from tests.server.test_browser import Page, browser, served  # noqa: F401
from tests.server.test_process import ServeProcess


async def test_a_copy_is_announced(served: ServeProcess, browser: Any) -> None:  # noqa: F811
    context = await browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    page = Page(await context.new_page())
    await page.open(served.url, "token=alice-token")
    await page.settings("openai", "gpt-4o")
    answer = await page.send("[[say:```\nprint(1)\n```]]")
    await answer.locator(".code .copy").click()
    await page.page.locator("#announce", has_text="Code copied").wait_for()
    await answer.locator(".copy-answer").click()
    await page.page.locator("#announce", has_text="Answer copied").wait_for()
