"""A long answer streaming while the user scrolls up to read: the page scrolled to the
bottom on every event, so nothing above the answer's end could be read until it ended.
It now follows the end only while the view is there (and again once scrolled back).
The live answer is fed its events here through the page's own ``LiveTurn`` (the module
the page runs), so the events arrive exactly between the user's scrolls."""

from __future__ import annotations

from typing import Any

from tests.server.test_browser import Page, browser, served  # noqa: F401
from tests.server.test_process import ServeProcess

FEED = """async (count) => {
    const { LiveTurn } = await import('/static/stream.js');
    const live = window.liveTurn || (window.liveTurn = new LiveTurn('A long answer, please'));
    for (let i = 0; i < count; i += 1) {
        live.handle({ name: 'text_delta', data: { text: `Line ${i} of the answer.\\n\\n` } });
    }
    await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
    const box = document.querySelector('#messages');
    return { top: box.scrollTop, bottom: box.scrollHeight - box.clientHeight };
}"""
SCROLLED = """(top) => new Promise((resolve) => {
    const box = document.querySelector('#messages');
    box.addEventListener('scroll', () => resolve(box.scrollTop), { once: true });
    box.scrollTop = top === null ? box.scrollHeight : top;
})"""


async def test_a_streaming_answer_leaves_the_view_where_the_user_scrolled(
        served: ServeProcess, browser: Any) -> None:  # noqa: F811
    context = await browser.new_context(viewport={"width": 1000, "height": 700})
    page = Page(await context.new_page())
    await page.open(served.url, "token=alice-token")
    first = await page.page.evaluate(FEED, 80)
    assert first["bottom"] > 200  # the answer overflows the view
    assert await page.page.evaluate(SCROLLED, 200) == 200  # the user scrolls up to read
    read = await page.page.evaluate(FEED, 5)
    assert read["top"] == 200 and read["bottom"] > first["bottom"]  # left where it was
    await page.page.evaluate(SCROLLED, None)  # back down: followed again, to the very end
    last = await page.page.evaluate(FEED, 5)
    assert last["top"] >= last["bottom"] - 1 and last["bottom"] > read["bottom"]
