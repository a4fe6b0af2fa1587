"""A code block's Copy button and a table's cells on a 390 px phone: the button sat over
the code's first line (``print('a fairly long line of py[Copy]``), hiding the code under
it, and a seven-column table broke short numbers inside its cells (``111 111 1``) to fit
the screen, where it may now scroll in its own box."""

from __future__ import annotations

from typing import Any

from tests.server.test_browser import Page, browser, served  # noqa: F401
from tests.server.test_process import ServeProcess

ANSWER = ("Here:\n\n```python\nprint('a fairly long line of python code that scrolls "
          "sideways for sure')\nx = 1\n```\n\n| a | b | c | d | e | f | g |\n"
          "|---|---|---|---|---|---|---|\n| 1111111 | 2222222 | 3333333 | 4444444 | 5555555 "
          "| 6666666 | 7777777 |\n")

CHECK = r"""async (answer) => {
    const { markdownNode } = await import('/static/livemd.js');
    const { el } = await import('/static/dom.js');
    document.querySelector('#welcome').hidden = true;
    const node = markdownNode(answer);
    document.querySelector('#messages').append(el('div', { class: 'msg assistant' }, node));
    await new Promise((resolve) => requestAnimationFrame(() => resolve()));
    const button = node.querySelector('.code .copy').getBoundingClientRect();
    const range = document.createRange();
    range.selectNodeContents(node.querySelector('.code pre'));
    const covered = [...range.getClientRects()].filter((r) => r.width > 0
        && r.left < button.right && r.right > button.left
        && r.top < button.bottom && r.bottom > button.top).length;
    const cells = [...node.querySelectorAll('td')];
    const lineHeight = parseFloat(getComputedStyle(cells[0]).lineHeight) || 20;
    const broken = cells.filter((td) => {
        const r = document.createRange();
        r.selectNodeContents(td);
        return r.getClientRects().length > 1 || r.getBoundingClientRect().height > 1.5 * lineHeight;
    }).map((td) => td.textContent);
    return { covered, broken, page: document.documentElement.scrollWidth };
}"""


async def test_the_copy_button_covers_no_code_and_cells_keep_their_words(
        served: ServeProcess, browser: Any) -> None:  # noqa: F811
    context = await browser.new_context(viewport={"width": 390, "height": 844},
                                        is_mobile=True, has_touch=True)
    page = Page(await context.new_page())
    await page.open(served.url, "token=alice-token")
    got = await page.page.evaluate(CHECK, ANSWER)
    assert got == {"covered": 0, "broken": [], "page": 390}, got
