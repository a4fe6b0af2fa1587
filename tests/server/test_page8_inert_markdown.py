"""Markdown and HTML an answer may carry, rendered by the page's ``markdown`` in chromium:
every vector comes out inert. Checked by what the DOM holds (tags, attributes, link
targets), not by a list of bad strings: each fragment may hold only the tags marked and
the page produce, attributes from a short list, and links to http(s), mailto or an
anchor. The fragments are also put in the page, and nothing they name may run or load."""

from __future__ import annotations

from typing import Any

from tests.server.test_browser import Page, browser, served  # noqa: F401
from tests.server.test_process import ServeProcess

VECTORS = [
    # javascript: in links of every form
    "[a](javascript:alert(1))", "[a](JAVASCRIPT:alert(1))", "[a]( javascript:alert(1))",
    "[a](<javascript:alert(1)>)", "[a](java\tscript:alert(1))", "[a](jav&#x61;script:alert(1))",
    "[a](&#106;avascript:alert(1))", "[a](javascript&colon;alert(1))",
    "[a](%6Aavascript:alert(1))", "<javascript:alert(1)>", "[a][x]\n\n[x]: javascript:alert(1)",
    "[a]\n\n[a]: <javascript:alert(1)> \"t\"", '<a href="  javascript:alert(1)">a</a>',
    '<a href="java&#10;script:alert(1)">a</a>', '<a href="vbscript:msgbox(1)">a</a>',
    '<a href="javascript://%0aalert(1)">a</a>', "[a](javascript:alert`1`)",
    '<a xlink:href="javascript:alert(1)">a</a>', '<area href="javascript:alert(1)">',
    # data: and other schemes
    "[a](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![i](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    '<a href="data:text/html,<script>alert(1)</script>">a</a>', "[a](file:///etc/passwd)",
    "[a](blob:https://x/1)", "[a](//evil.example/x)", '<a href="ftp://x">a</a>',
    # SVG and MathML
    "<svg><script>alert(1)</script></svg>",
    "<svg><a xlink:href=javascript:alert(1)><text>x</text></a></svg>",
    "<svg><animate onbegin=alert(1) attributeName=x dur=1s>",
    "<svg><use href=data:image/svg+xml,x#a>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    "<math href=javascript:alert(1)>x</math>",
    "<svg><foreignObject><iframe src=javascript:alert(1)>",
    # CSS
    "<style>*{background:url(https://evil.example/track)}</style>x",
    '<div style="background:url(https://evil.example/t)">x</div>',
    '<link rel=stylesheet href="https://evil.example/x.css">',
    '<p class="cursor-blink toast" id="messages">spoof</p>',
    "<font face=x color=red size=7>big</font>", '<table background="https://evil.example/t"><tr><td>x',
    # loaders and other active content
    "<img src=https://evil.example/t>", "![t](https://evil.example/t.png)",
    '<img srcset="https://evil.example/t 1x">', '<picture><source srcset="https://e.example/t">',
    "<video poster=https://evil.example/t><source src=https://evil.example/v>",
    "<audio src=https://evil.example/a>", "<iframe srcdoc='<script>alert(1)</script>'>",
    "<object data=https://evil.example/x>", "<embed src=https://evil.example/x>",
    '<meta http-equiv="refresh" content="0;url=https://evil.example">',
    "<base href=https://evil.example/>", "<form action=https://evil.example><input name=x>",
    '<button formaction="javascript:alert(1)">b</button>',
    "<template><script>alert(1)</script></template>",
    "<noscript><p title=\"</noscript><img src=x onerror=alert(1)>\">",
    '<a href="https://ok.example" ping="https://evil.example/ping">a</a>',
    '<a href="https://ok.example" target="_top" rel="opener">a</a>',
    '<a href="https://ok.example" download="x.exe">a</a>',
    '<details open ontoggle=alert(1)><summary>s</summary></details>',
    '<div popover id=p>x</div><button popovertarget=p>b</button>',
    "<marquee onstart=alert(1)>m</marquee>", "<isindex action=javascript:alert(1)>",
    '<a href="https://ok.example" formaction="javascript:alert(1)">a</a>',
    '<p data-x="1" aria-hidden="true" tabindex="-1" hidden>hidden text</p>',
]

ALLOWED_TAGS = {"div", "p", "a", "strong", "em", "del", "code", "pre", "button", "ul", "ol",
                "li", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "br", "table",
                "thead", "tbody", "tr", "th", "td", "span", "b", "i", "u", "s", "sub", "sup",
                "small", "big", "font", "details", "summary", "kbd", "mark", "abbr", "cite",
                "q", "dl", "dt", "dd", "ins", "var", "samp", "tt", "strike", "center",
                "marquee", "caption", "colgroup", "col", "tfoot", "section", "article",
                "aside", "header", "footer", "nav", "figure", "figcaption", "time", "dfn",
                "bdi", "bdo", "wbr", "rp", "rt", "ruby", "address", "main", "hgroup"}
ALLOWED_ATTRIBUTES = {"href", "title", "target", "rel", "dir", "type", "align", "start",
                      "open", "colspan", "rowspan", "lang", "abbr", "scope", "datetime",
                      "cite", "reversed", "color", "size", "face", "value", "width",
                      "height", "valign", "span", "checked", "disabled"}

CHECK = r"""async ({ vectors }) => {
    const { markdown } = await import('/static/markdown.js');
    const out = [];
    for (const vector of vectors) {
        const box = document.createElement('div');
        box.append(markdown(vector));
        const nodes = [...box.querySelectorAll('*')];
        out.push({
            vector,
            tags: nodes.map((n) => n.localName),
            attributes: nodes.flatMap((n) => [...n.attributes].map((a) => a.name)),
            classes: nodes.map((n) => n.getAttribute('class')).filter((c) => c !== null),
            hrefs: nodes.filter((n) => n.hasAttribute('href')).map((n) => n.getAttribute('href')),
            copyButtons: box.querySelectorAll('div.code > button.copy').length,
            buttons: box.querySelectorAll('button').length,
            html: box.innerHTML,
        });
        document.querySelector('#messages').append(box);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    return out;
}"""


async def test_every_vector_renders_inert(served: ServeProcess, browser: Any) -> None:  # noqa: F811
    context = await browser.new_context()
    requests: list[str] = []
    context.on("request", lambda request: requests.append(request.url))
    page = Page(await context.new_page())
    dialogs: list[str] = []
    page.page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    await page.open(served.url, "token=alice-token")
    requests.clear()
    found = await page.page.evaluate(CHECK, {"vectors": VECTORS})
    bad = []
    for item in found:
        tags = set(item["tags"]) - ALLOWED_TAGS
        attributes = set(item["attributes"]) - ALLOWED_ATTRIBUTES - {"class"}
        # Classes only the page's own boxes carry: a code block's, its Copy button, a table's.
        attributes |= set(item["classes"]) - {"code", "copy", "table"}
        hrefs = [h for h in item["hrefs"]
                 if not h.lower().startswith(("https://", "http://", "mailto:", "#"))]
        # The page's own buttons are the code blocks' Copy buttons, none from an answer.
        buttons = item["buttons"] - item["copyButtons"]
        if tags or attributes or hrefs or buttons:
            bad.append((item["vector"], tags, attributes, hrefs, buttons, item["html"]))
    assert bad == [], "\n".join(map(str, bad))
    foreign = [u for u in requests if not u.startswith(served.url)]
    assert foreign == [] and dialogs == [], (foreign, dialogs)
