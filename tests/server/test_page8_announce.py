"""What a screen reader hears: the page's live regions, watched in chromium. The message
list was itself a live region, so opening a chat, paging in older messages and the
re-render after every turn put the whole window of history into it: a screen reader
read the chat again after each answer. Now only the finished answer is announced, once.
Announced text here is what is added inside an element with ``aria-live`` (or a live
role) that is not ``aria-busy``, as a screen reader reads a polite region."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.server.test_browser import Page, browser, served  # noqa: F401
from tests.server.test_process import ServeProcess

WATCH = r"""() => {
    window.announced = [];
    const ROLES = { log: 'polite', status: 'polite', alert: 'assertive' };
    const live = (node) => {
        for (let n = node.nodeType === 1 ? node : node.parentElement; n; n = n.parentElement) {
            const mode = n.getAttribute('aria-live')
                || ROLES[n.getAttribute('role')];
            if (mode === 'off') return null;
            if (mode) return n;
        }
        return null;
    };
    new MutationObserver((records) => {
        for (const record of records) {
            const added = record.type === 'characterData'
                ? [record.target] : [...record.addedNodes];
            for (const node of added) {
                const region = live(node);
                if (region && region.getAttribute('aria-busy') !== 'true') {
                    window.announced.push(node.textContent);
                }
            }
            if (record.type === 'attributes' && record.target.getAttribute('aria-busy') !== 'true'
                    && live(record.target)) {
                window.announced.push(record.target.textContent);  // busy ended: read it
            }
        }
    }).observe(document.body, { childList: true, subtree: true, characterData: true,
                                attributes: true, attributeFilter: ['aria-busy'] });
}"""


async def test_only_the_new_answer_is_announced(served: ServeProcess, browser: Any) -> None:  # noqa: F811
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer alice-token"}) as http:
        chat = (await (await http.post(served.url + "api/chats")).json())["id"]
        for i in range(3):
            body = {"provider": "openai", "model": "gpt-4o", "text": f"Old question {i}"}
            async with http.post(served.url + f"api/chats/{chat}/turns", json=body) as answer:
                await answer.read()
    page = Page(await (await browser.new_context()).new_page())
    await page.page.goto(served.url + "#token=alice-token")
    await page.page.evaluate(WATCH)
    await page.page.wait_for_selector("body[data-ready=true]")
    await page.page.locator(".chat-item").first.click()
    await page.page.locator(".msg.assistant").nth(2).wait_for()
    await page.send("A new question")
    await page.page.wait_for_function("() => window.announced.join(' ').includes('A new question')")
    heard = " ".join(await page.page.evaluate("() => window.announced"))
    assert "Old question" not in heard, heard[:500]
    assert heard.count("You said: A new question") == 1, heard[:500]
