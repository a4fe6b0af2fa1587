"""A streamed answer's frames cost what arrived, not what the answer holds: a 100 KB
table, list, paragraph and single line go through the page's own ``LiveTurn`` in
50-character deltas, a frame awaited every 20; ``marked.parse`` is wrapped to count the
characters each animation frame renders. The old page rendered a long table's (or list's)
whole unfinished block again in one frame, ~100 KB near its end."""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.test_browser import Page, browser, served  # noqa: F401
from tests.server.test_page8_huge_block import table
from tests.server.test_process import ServeProcess

STREAM = r"""async ({ text, perDelta, perFrame }) => {
    const { LiveTurn } = await import('/static/stream.js');
    const { markdown } = await import('/static/markdown.js');
    const { marked } = await import('/static/vendor/marked.esm.js');
    const live = new LiveTurn('A long answer, please');
    const parse = marked.parse;
    let inFrame = 0;
    let worstChars = 0;
    marked.parse = (source, options) => {
        inFrame += source.length;
        return parse(source, options);
    };
    // The clock stands still while it streams: the page waits three times a render's time
    // before the next (a quarter of the main thread at most), which would make what a
    // render takes in depend on this machine's speed; here every frame renders.
    const clock = performance.now.bind(performance);
    performance.now = () => 0;
    const raf = window.requestAnimationFrame;
    let worstMs = 0;
    const times = [];
    let worstRows = 0;
    window.requestAnimationFrame = (callback) => raf((t) => {
        inFrame = 0;
        const start = clock();
        callback(t);
        worstMs = Math.max(worstMs, clock() - start);
        times.push(clock() - start);
        for (const table of live.text.querySelectorAll('table')) {
            worstRows = Math.max(worstRows, table.rows.length);
        }
        worstChars = Math.max(worstChars, inFrame);
    });
    const frame = () => new Promise((resolve) => raf(() => resolve()));
    const deltas = Math.ceil(text.length / perDelta);
    for (let d = 0; d < deltas; d += 1) {
        const delta = text.slice(d * perDelta, (d + 1) * perDelta);
        live.handle({ name: 'text_delta', data: { text: delta } });
        if ((d + 1) % perFrame === 0) await frame();
    }
    await frame();
    performance.now = clock;
    const streamed = live.text.innerHTML;
    const streamedText = live.text.textContent;
    marked.parse = parse;
    window.requestAnimationFrame = raf;
    const began = clock();
    live.handle({ name: 'turn_completed', data: { finishReason: 'stop' } });
    const flushMs = clock() - began;
    const exact = document.createElement('div');
    exact.append(markdown(text));
    const sorted = [...times].sort((a, b) => a - b);
    const p = (q) => sorted[Math.floor(q * (sorted.length - 1))];
    const last = times.slice(-40);
    return { p50: p(0.5), p90: p(0.9), lastAvg: last.reduce((a, b) => a + b, 0) / last.length,
             worstChars, worstRows, worstMs, flushMs, streamed, streamedText,
             exactText: exact.textContent,
             final: live.text.innerHTML, exact: exact.innerHTML };
}"""


def listing(total: int) -> str:
    lines = ["Steps:", ""]
    for i in range(10**6):
        lines.append(f"{i + 1}. Step **{i}**: do `thing {i}` and then [read](https://x.test/{i})")
        if i % 7 == 0:
            lines.append(f"   - a detail of step {i}")
        if sum(len(line) + 1 for line in lines[-40:]) and len("\n".join(lines)) >= total:
            break
    return "\n".join(lines) + "\n"


def poem(total: int) -> str:
    lines = ["A paragraph of short lines, one block:"]
    while len("\n".join(lines)) < total:
        lines.append(f"line {len(lines)} of *the* verse, with `code` and more words")
    return "\n".join(lines) + "\n"


def one_line(total: int) -> str:
    words = []
    while sum(len(w) + 1 for w in words) < total:
        words.append(f"word{len(words)}")
    return " ".join(words)


async def stream(served: ServeProcess, browser: Any, text: str) -> dict[str, Any]:  # noqa: F811
    context = await browser.new_context(viewport={"width": 1000, "height": 700})
    page = Page(await context.new_page())
    await page.open(served.url, "token=alice-token")
    got: dict[str, Any] = await page.page.evaluate(
        STREAM, {"text": text, "perDelta": 50, "perFrame": 20})
    shown = ("worstChars", "worstRows", "worstMs", "flushMs", "p50", "p90", "lastAvg")
    print({k: round(v) for k, v in got.items() if k in shown})
    assert got["final"] == got["exact"]
    return got


@pytest.mark.parametrize("make", [table, listing, poem, one_line])
async def test_a_frame_renders_what_arrived_not_the_whole_block(
        served: ServeProcess, browser: Any, make: Any) -> None:  # noqa: F811
    text = make(100_000)
    got = await stream(served, browser, text)
    # A frame brings 1,000 characters; it may take in a part of ~8 KB and the short rest
    # of its block, never the 100 KB block; a table renders its new rows only.
    assert got["worstChars"] < 12_000, (got["worstChars"], len(text))
    # What streamed reads as the answer does.
    assert "".join(got["streamedText"].split()) == "".join(got["exactText"].split())
    # No table laid out again holds the whole table's rows (~2,400 here), a part of them.
    assert got["worstRows"] <= 102, got["worstRows"]
