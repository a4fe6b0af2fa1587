"""A 200 KB answer streamed in 4,000 deltas: the page re-parsed the whole answer's markdown
every frame (quadratic: a long answer's frames took longer and longer), now it renders at
most once per frame, each finished block once, and the whole text exactly at the end.
The deltas go through the page's own ``LiveTurn``, a frame awaited every 200 of them;
``marked.parse`` (the vendored module the page imports) is wrapped to count its work."""

from __future__ import annotations

from typing import Any

from tests.server.test_browser import Page, browser, served  # noqa: F401
from tests.server.test_process import ServeProcess

STREAM = r"""async ({ total, perDelta, perFrame }) => {
    const { LiveTurn } = await import('/static/stream.js');
    const { markdown } = await import('/static/markdown.js');
    const { marked } = await import('/static/vendor/marked.esm.js');
    const blocks = [];
    for (let i = 0, size = 0; size < total; i += 1) {
        const block = [
            `## Section ${i}\n`,
            `Paragraph ${i} with **bold**, \`code\` and a [link](https://example.com/${i}).\n`
                + 'Its second line.\n',
            '```python\ndef f' + i + '():\n\n    return ' + i + '\n```\n',
            `- item ${i}\n- item ${i + 1}\n  - nested ${i}\n`,
            `| a | b |\n|---|---|\n| ${i} | ${i * 2} |\n`,
        ][i % 5];
        blocks.push(block);
        size += block.length + 1;
    }
    const text = blocks.join('\n');
    const live = new LiveTurn('A long answer, please');
    const parse = marked.parse;
    let calls = 0;
    let parsed = 0;
    marked.parse = (source, options) => {
        calls += 1;
        parsed += source.length;
        return parse(source, options);
    };
    const frame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));
    const deltas = Math.ceil(text.length / perDelta);
    let frames = 0;
    for (let d = 0; d < deltas; d += 1) {
        const delta = text.slice(d * perDelta, (d + 1) * perDelta);
        live.handle({ name: 'text_delta', data: { text: delta } });
        if ((d + 1) % perFrame === 0) { await frame(); frames += 1; }
    }
    await frame();
    frames += 1;
    const streamed = { calls, parsed, html: live.text.innerHTML };
    live.handle({ name: 'turn_completed', data: { finishReason: 'stop' } });
    const final = { calls: calls - streamed.calls, html: live.text.innerHTML };
    marked.parse = parse;
    const exact = document.createElement('div');
    exact.append(markdown(text));
    return { length: text.length, deltas, frames, streamed, final, exact: exact.innerHTML,
             codeBlocks: live.text.querySelectorAll('div.code pre').length,
             expectedCode: blocks.filter((b) => b.startsWith('```')).length };
}"""


async def test_a_long_streamed_answer_renders_once_per_frame_and_exactly_at_the_end(
        served: ServeProcess, browser: Any) -> None:  # noqa: F811
    context = await browser.new_context(viewport={"width": 1000, "height": 700})
    page = Page(await context.new_page())
    await page.open(served.url, "token=alice-token")
    got = await page.page.evaluate(STREAM, {"total": 200_000, "perDelta": 50, "perFrame": 200})
    length, frames, streamed = got["length"], got["frames"], got["streamed"]
    assert length >= 200_000 and got["deltas"] >= 4_000
    # Coalesced: one render a frame (finished blocks and the tail; a table at the tail
    # adds its new rows and its unfinished row: three parses at most), never one a delta.
    assert streamed["calls"] <= 3 * frames, (streamed["calls"], frames)
    # Each finished block parsed once: about the answer's length in all, not a frame's
    # whole answer again (the old page parsed ~10x the answer here).
    assert streamed["parsed"] < 1.5 * length, (streamed["parsed"], length)
    # What streamed shows the answer (nothing here reaches across blocks), and the end
    # is one exact render of the whole text.
    assert streamed["html"] == got["exact"]
    assert got["final"]["calls"] == 1
    assert got["final"]["html"] == got["exact"]
    assert got["codeBlocks"] == got["expectedCode"] > 100
