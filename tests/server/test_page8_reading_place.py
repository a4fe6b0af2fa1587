"""Reading older messages while an answer streams, then the answer ends: the page read
the chat again and drew its newest 50 messages from scratch, scrolled to the bottom, so
the reader lost both the place and the older messages paged in. The end of a turn now
keeps the messages older than the new window and the message read at the top of the
view where it was (the view still follows the end when it was there)."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from tests.server.test_browser import Page, browser, served  # noqa: F401
from tests.server.test_process import ServeProcess

HANG = {"provider": "openai", "kind": "hang", "after_events": 6}
PLACE = """(seq) => {
    const box = document.querySelector('#messages');
    const node = box.querySelector(`.msg[data-seq="${seq}"]`);
    return node && node.getBoundingClientRect().top - box.getBoundingClientRect().top;
}"""
READ = """async (seq) => {
    const box = document.querySelector('#messages');
    while (!box.querySelector(`.msg[data-seq="${seq}"]`)) {
        box.scrollTop = 0;
        box.dispatchEvent(new Event('scroll'));
        await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const node = box.querySelector(`.msg[data-seq="${seq}"]`);
    box.scrollTop += node.getBoundingClientRect().top - box.getBoundingClientRect().top - 30;
    await new Promise((resolve) => requestAnimationFrame(() => resolve()));
}"""


async def test_the_end_of_a_turn_keeps_the_place_read(
        served: ServeProcess, browser: Any) -> None:  # noqa: F811
    headers = {"Authorization": "Bearer alice-token"}
    async with aiohttp.ClientSession(headers=headers) as http:
        chat = (await (await http.post(served.url + "api/chats")).json())["id"]
        for i in range(40):
            body = {"provider": "openai", "model": "gpt-4o", "text": f"Question {i}"}
            async with http.post(served.url + f"api/chats/{chat}/turns", json=body) as answer:
                await answer.read()
        page = Page(await (await browser.new_context(viewport={"width": 1000, "height": 700}))
                    .new_page())
        await page.open(served.url, f"token=alice-token&chat={chat}")
        await page.page.locator(".msg.assistant").first.wait_for()
        await page.settings("openai", "gpt-4o")
        assert (await http.post(served.url + "api/emulator/faults", json=HANG)).status == 200
    await page.page.fill("#text", "A long answer, please")
    await page.page.click("#send")
    await page.page.locator("#stop").wait_for()
    await page.page.evaluate(READ, 10)  # older than the newest 50: paged in
    before = await page.page.evaluate(PLACE, 10)
    await page.page.click("#stop")
    await page.page.locator("#send:not([disabled])").wait_for()
    await page.page.locator(".msg.assistant.aborted").wait_for()
    after = await page.page.evaluate(PLACE, 10)
    assert after is not None and abs(after - before) < 2, (before, after)
    seqs = await page.page.evaluate(
        "() => [...document.querySelectorAll('.msg[data-seq]')].map(n => Number(n.dataset.seq))")
    assert seqs == list(range(1, 83)), seqs  # the whole chat, once, in order
    # The cost shown is the whole chat's (every turn is shown), not the new window's.
    async with aiohttp.ClientSession(headers=headers) as http:
        whole = await (await http.get(served.url + f"api/chats/{chat}?limit=100")).json()
    shown = await page.page.locator("#chat-cost").inner_text()
    assert shown.endswith("so far") and float(shown.split()[0].lstrip("$")) == \
        pytest.approx(float(whole["costUsd"]), rel=1e-6), (shown, whole["costUsd"])
