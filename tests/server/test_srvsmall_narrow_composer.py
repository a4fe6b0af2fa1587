"""The message field's placeholder on a 375 px screen: it ran past the field's two rows
(the hint cut off mid-line, a third line hidden under the border). It now fits them, with
a keyboard and on a touch screen alike, and the wide page keeps the whole hint."""

from __future__ import annotations

from typing import Any

from tests.server.test_browser import Page, browser, served  # noqa: F401
from tests.server.test_process import ServeProcess

PLACEHOLDER = """() => {
    const field = document.querySelector('#text');
    const style = getComputedStyle(field);
    const probe = document.createElement('div');
    for (const name of ['font', 'letterSpacing', 'wordSpacing', 'lineHeight', 'textTransform'])
        probe.style[name] = style[name];
    const px = (name) => parseFloat(style[name]);
    const width = field.clientWidth - px('paddingLeft') - px('paddingRight');
    Object.assign(probe.style, { position: 'absolute', visibility: 'hidden', padding: '0',
                                 border: '0', whiteSpace: 'pre-wrap', overflowWrap: 'break-word',
                                 width: `${width}px` });
    document.body.append(probe);
    probe.textContent = 'M';
    const line = probe.getBoundingClientRect().height;
    probe.textContent = field.placeholder;
    const lines = Math.round(probe.getBoundingClientRect().height / line);
    probe.remove();
    const inner = field.clientHeight - px('paddingTop') - px('paddingBottom');
    return { placeholder: field.placeholder, lines, rows: Math.round(inner / line), width };
}"""


SCREENS = [(375, False), (375, True), (414, False), (760, False), (1000, False)]
"""Width and touch: a phone both ways, a narrow window, just past the narrow layout, wide."""


async def test_the_message_placeholder_fits_two_rows(
        served: ServeProcess, browser: Any) -> None:  # noqa: F811
    for width, touch in SCREENS:
        context = await browser.new_context(viewport={"width": width, "height": 700},
                                            is_mobile=touch, has_touch=touch)
        page = Page(await context.new_page())
        await page.open(served.url, "token=alice-token")
        got = await page.page.evaluate(PLACEHOLDER)
        assert got["lines"] <= got["rows"] == 2, (width, touch, got)
        assert got["placeholder"].startswith("Message"), got
        if width > 720:  # room for the whole hint
            assert "Shift+Enter" in got["placeholder"], got
        await context.close()
