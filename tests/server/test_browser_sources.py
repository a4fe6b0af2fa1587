"""An answer's sources in the page (wire6): the http(s) URLs its citations name, each
once, as links under the answer; any other scheme is no link, and titles are text."""

from __future__ import annotations

from typing import Any

from tests.server import test_browser
from tests.server.test_browser import Page
from tests.server.test_process import ServeProcess

pytestmark = test_browser.pytestmark
served = test_browser.served
browser = test_browser.browser


async def test_an_answers_sources_are_safe_links_under_it(
        served: ServeProcess, browser: Any) -> None:
    page = Page(await (await browser.new_context()).new_page())
    await page.open(served.url, "token=alice-token")
    await page.settings("openai", "gpt-4o")
    answer = await page.send("[[cite:https://example.com/a]] [[cite:javascript:alert(1)]] "
                             "[[cite:https://example.com/a]] [[cite:http://example.org/b]] hi")
    links = answer.locator(".sources a")
    assert await links.count() == 2
    assert [await links.nth(i).get_attribute("href") for i in range(2)] == [
        "https://example.com/a", "http://example.org/b"]
    assert [await links.nth(i).inner_text() for i in range(2)] == ["Source 1", "Source 4"]
    assert await links.first.get_attribute("rel") == "noopener noreferrer nofollow"
    # the same rendering, fed a hostile title and URLs: text stays text, no link but http(s)
    html = await page.page.evaluate("""async () => {
      const { sourcesView } = await import("/static/messages.js");
      const node = sourcesView([
        { url: "https://example.com/x", title: "<img src=x onerror=alert(1)>" },
        { url: "JavaScript:alert(1)", title: "js" }, { url: "data:text/html,hi" },
        { url: "//example.com/y" }, { url: 5 }, null]);
      return [node.querySelectorAll("a").length, node.querySelector("a").textContent,
              node.querySelectorAll("img").length, sourcesView([{ url: "ftp://x" }])];
    }""")
    assert html == [1, "<img src=x onerror=alert(1)>", 0, None]
