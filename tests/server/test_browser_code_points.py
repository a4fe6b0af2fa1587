"""The page counts characters as the server does, in code points: an emoji or any astral
character is one character, not the two UTF-16 code units a JavaScript ``length`` gives."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.server import test_browser
from tests.server.test_browser import Page
from tests.server.test_process import ServeProcess

pytestmark = test_browser.pytestmark
served = test_browser.served
browser = test_browser.browser
ASTRAL = "\U0001d49c"  # MATHEMATICAL SCRIPT CAPITAL A, two UTF-16 code units


async def _searched(page: Page, typed: str) -> str:
    """What the search box sends as ``q`` after the user types ``typed``."""
    async with page.page.expect_request(lambda r: "/api/chats?" in r.url and "q=" in r.url) \
            as request:
        await page.page.get_by_role("searchbox", name="Search chats").fill(typed)
    return parse_qs(urlsplit((await request.value).url).query)["q"][0]


async def test_the_search_box_takes_200_characters_of_astral_text(
        served: ServeProcess, browser: Any) -> None:
    page = Page(await (await browser.new_context()).new_page())
    await page.open(served.url, "token=alice-token")
    # 150 astral characters: the server takes them (its limit is 200 characters)
    assert await _searched(page, ASTRAL * 150) == ASTRAL * 150
    # the 200th character astral: kept whole, not cut to half a surrogate pair (U+FFFD)
    assert await _searched(page, "a" * 199 + "😀") == "a" * 199 + "😀"
    await page.page.get_by_role("searchbox", name="Search chats").fill("")


async def test_the_text_limit_counts_emoji_as_one_character(
        served: ServeProcess, browser: Any) -> None:
    page = Page(await (await browser.new_context()).new_page())

    async def small_limit(route: Any) -> None:
        answer = await route.fetch()
        config = await answer.json()
        config["limits"]["maxTextChars"] = 12
        await route.fulfill(response=answer, body=json.dumps(config))

    await page.page.route("**/api/config", small_limit)
    await page.open(served.url, "token=alice-token")
    await page.settings("openai", "gpt-4o")
    answer = await page.send("😀" * 12)  # 12 characters, 24 code units: taken
    assert "You said: " + "😀" * 12 in await answer.inner_text()
    await page.page.fill("#text", "😀" * 13)
    await page.page.click("#send")
    await page.toast("The message has 13 characters; the server takes at most 12.")
