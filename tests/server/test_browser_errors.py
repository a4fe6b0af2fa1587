"""Errors the page shows say what happened and what to do: a server that does not answer
was "Failed to fetch" (the browser's words), an error page of a proxy in front of it was
"bad_response"."""

from __future__ import annotations

from typing import Any

from tests.server import test_browser
from tests.server.test_browser import Page
from tests.server.test_process import ServeProcess

pytestmark = test_browser.pytestmark
served = test_browser.served
browser = test_browser.browser


async def test_an_unreachable_server_or_a_proxy_s_error_page_is_said_in_words(
        served: ServeProcess, browser: Any) -> None:
    page = Page(await (await browser.new_context()).new_page())
    await page.open(served.url, "token=alice-token")
    search = page.page.get_by_role("searchbox", name="Search chats")
    await page.page.route("**/api/chats?q=gone*", lambda route: route.abort("connectionrefused"))
    await search.fill("gone")
    await page.toast("the server cannot be reached: check that it is running and that you "
                     "are online, then try again")
    await page.page.route("**/api/chats?q=proxy*", lambda route: route.fulfill(
        status=502, content_type="text/html", body="<html><h1>502 Bad Gateway</h1></html>"))
    await search.fill("proxy")
    await page.toast("HTTP 502: the answer was not the server's JSON (a proxy in front of "
                     "it?); try again shortly")
