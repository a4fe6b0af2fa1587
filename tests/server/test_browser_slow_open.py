"""On a slow network, opening chat A and then chat B before A's view arrived showed A's
messages under B: ``openChat`` rendered whatever answer came back last. The page now
drops the answer of a chat it no longer shows."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.server import test_browser
from tests.server.test_browser import Page, served
from tests.server.test_process import ServeProcess

pytestmark = test_browser.pytestmark
browser = test_browser.browser
__all__ = ["served"]


READ = """
const json = Response.prototype.json;
window.readBodies = [];
Response.prototype.json = function () {  // a macrotask after the body's read: the code
  const url = this.url;                  // awaiting it has run its following steps
  return json.call(this).then((value) => {
    setTimeout(() => window.readBodies.push(url), 0);
    return value;
  });
};
"""
"""The URLs whose JSON body the page has read and acted on, in ``window.readBodies``."""


async def test_a_slow_chat_view_does_not_replace_the_chat_opened_after_it(
        served: ServeProcess, browser: Any) -> None:
    context = await browser.new_context()
    await context.add_init_script(READ)
    page = Page(await context.new_page())
    await page.open(served.url, "token=alice-token")
    await page.send("question of chat A")
    chat_a = await page.page.evaluate("decodeURIComponent(location.hash.split('=')[1])")
    await page.page.click("#new-chat")
    await page.send("question of chat B")
    chat_b = await page.page.evaluate("decodeURIComponent(location.hash.split('=')[1])")
    assert chat_a != chat_b

    held, release = asyncio.Event(), asyncio.Event()

    async def slow_a(route: Any) -> None:  # A's first view waits until B is shown
        if not held.is_set():
            held.set()
            await release.wait()
        await route.continue_()

    await page.page.route(f"**/api/chats/{chat_a}", slow_a)
    await page.page.evaluate("window.readBodies = []")  # A's views read so far: not this one
    await page.page.click(f".chat-item[data-chat='{chat_a}']")
    await held.wait()
    await page.page.click(f".chat-item[data-chat='{chat_b}']")
    await page.page.locator("#messages .msg.user", has_text="question of chat B").wait_for()
    release.set()
    await page.page.wait_for_function(
        "id => window.readBodies.some((url) => url.endsWith(`/api/chats/${id}`))", arg=chat_a)
    questions = page.page.locator("#messages .msg.user")
    assert await questions.count() == 1
    assert "question of chat B" in await questions.inner_text()
    assert await page.page.evaluate("location.hash") == f"#chat={chat_b}"
    active = page.page.locator(".chat-item.active")
    assert await active.get_attribute("data-chat") == chat_b
