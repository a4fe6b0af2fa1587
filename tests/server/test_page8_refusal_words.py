"""A turn refused by something that is not the server's JSON API: a proxy in front of it
answering 413 (nginx's default body limit is 1 MiB: one photo) or 502 with its own HTML
page, or a JSON error with no message. The page said ``Turn refused: undefined``; now it
says what happened in words, with the status, and keeps the message and attachments."""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.test_browser import Page, browser, served  # noqa: F401
from tests.server.test_process import ServeProcess

HTML = "<html><body><h1>413 Request Entity Too Large</h1><hr>nginx</body></html>"


@pytest.mark.parametrize(("status", "content_type", "body", "words"), [
    (413, "text/html", HTML, "HTTP 413: the message and its attachments are larger than"),
    (502, "text/html", "<html>Bad Gateway</html>", "HTTP 502: the server did not answer"),
    (500, "application/json", '{"detail": "boom"}', "HTTP 500: the server failed"),
])
async def test_a_refusal_that_is_no_api_error_is_said_in_words(
        served: ServeProcess, browser: Any,  # noqa: F811
        status: int, content_type: str, body: str, words: str) -> None:
    page = Page(await (await browser.new_context()).new_page())
    await page.open(served.url, "token=alice-token")

    async def refuse(route: Any) -> None:
        if route.request.method == "POST":
            await route.fulfill(status=status, content_type=content_type, body=body)
        else:
            await route.continue_()

    await page.page.route("**/api/chats/*/turns", refuse)
    await page.page.fill("#text", "a question that a proxy refuses")
    await page.page.click("#send")
    toast = page.page.locator(".toast", has_text="Turn refused")
    await toast.wait_for()
    said = await toast.inner_text()
    assert words in said and "undefined" not in said, said
    assert await page.page.input_value("#text") == "a question that a proxy refuses"
