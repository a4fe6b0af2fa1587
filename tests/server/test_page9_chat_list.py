"""A long chat list scrolls; its entries keep their height. Each entry (a button that cuts
its title with an ellipsis, so ``overflow: hidden``) is a flex item of the list, whose
automatic minimum height is then 0: with more chats than the sidebar holds, the old page
squeezed every entry to fit, cutting its date line off and then its title in half."""

from __future__ import annotations

from typing import Any

from tests.server.test_browser import Page, browser, served  # noqa: F401
from tests.server.test_process import ServeProcess

MAKE = """async (count) => {
    const headers = { Authorization: 'Bearer alice-token', 'Content-Type': 'application/json' };
    for (let i = 0; i < count; i += 1) {
        const made = await fetch('/api/chats', { method: 'POST', headers, body: '{}' });
        const chat = await made.json();
        const title = JSON.stringify({ title: `Chat number ${i}` });
        await fetch(`/api/chats/${chat.id}`, { method: 'PATCH', headers, body: title });
    }
}"""

CLIPPED = """() => [...document.querySelectorAll('#chat-list .chat-item')]
    .filter((item) => item.scrollHeight > item.clientHeight + 1)
    .map((item) => [item.textContent, item.clientHeight, item.scrollHeight])"""


async def test_a_long_chat_list_scrolls_and_keeps_each_entry_whole(
        served: ServeProcess, browser: Any) -> None:  # noqa: F811
    context = await browser.new_context(viewport={"width": 1280, "height": 700})
    page = Page(await context.new_page())
    await page.open(served.url, "token=alice-token")
    await page.page.evaluate(MAKE, 20)
    await page.page.reload()
    await page.page.wait_for_selector("body[data-ready=true]")
    items = page.page.locator("#chat-list .chat-item")
    await items.nth(19).wait_for()
    assert await page.page.evaluate(CLIPPED) == []
    # The list scrolls to its last entry, which is then seen whole.
    last = items.nth(19)
    await last.scroll_into_view_if_needed()
    box = await last.bounding_box()
    nav = await page.page.locator("#chat-list").bounding_box()
    assert box is not None and nav is not None
    assert nav["y"] <= box["y"] and box["y"] + box["height"] <= nav["y"] + nav["height"] + 1
    assert await page.page.locator("#chat-list").evaluate("n => n.scrollHeight > n.clientHeight")
