"""Very long words, URLs, inline code, tables and code lines on a 390 px phone: the page
never scrolls sideways (a table or a code block scrolls inside its own box), in an answer,
in a question, and in a tool call's folded result."""

from __future__ import annotations

from typing import Any

from tests.server.test_browser import Page, browser, served  # noqa: F401
from tests.server.test_process import ServeProcess

WORD = "Donaudampfschifffahrtsgesellschaftskapitän" * 20
URL = "https://example.com/" + "a-very-long-path-segment/" * 30 + "?q=" + "x" * 300
ANSWER = "\n\n".join([
    f"A word: {WORD}.", f"A URL: {URL}", f"A link: [{URL}]({URL})", f"Inline code: `{WORD}`",
    "| " + " | ".join(f"column {i} {WORD[:60]}" for i in range(12)) + " |\n|"
    + "---|" * 12 + "\n| " + " | ".join(str(i) for i in range(12)) + " |",
    "```\n" + "x = '" + "y" * 600 + "'\n```", f"> {WORD}", f"- {URL}\n  - {WORD}",
    f"# {WORD}", f"**{WORD}**",
])

CHECK = r"""async ({ answer, word }) => {
    const { markdownNode } = await import('/static/livemd.js');
    const { el } = await import('/static/dom.js');
    document.querySelector('#welcome').hidden = true;
    const box = document.querySelector('#messages');
    box.append(el('div', { class: 'msg user' }, el('span', { class: 'text' }, word)));
    box.append(el('div', { class: 'msg assistant' }, markdownNode(answer)));
    await new Promise((resolve) => requestAnimationFrame(() => resolve()));
    const wide = [...box.querySelectorAll('*')].filter((n) => {
        const r = n.getBoundingClientRect();
        // A box that scrolls itself (a table's or code's) may hold wider content.
        const scrolls = (s) => ['auto', 'scroll'].includes(getComputedStyle(s).overflowX);
        let up = n.parentElement;
        while (up && up !== box) { if (scrolls(up)) return false; up = up.parentElement; }
        return r.right > window.innerWidth + 0.5;
    }).map((n) => n.localName + '.' + n.className);
    return { page: document.documentElement.scrollWidth, body: document.body.scrollWidth,
             messages: box.scrollWidth - box.clientWidth, wide: wide.slice(0, 10) };
}"""


async def test_long_content_never_scrolls_the_page_sideways(
        served: ServeProcess, browser: Any) -> None:  # noqa: F811
    context = await browser.new_context(viewport={"width": 390, "height": 844},
                                        is_mobile=True, has_touch=True)
    page = Page(await context.new_page())
    await page.open(served.url, "token=alice-token")
    got = await page.page.evaluate(CHECK, {"answer": ANSWER, "word": WORD})
    assert got == {"page": 390, "body": 390, "messages": 0, "wide": []}, got
