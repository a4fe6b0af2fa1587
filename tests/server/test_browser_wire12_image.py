"""wire12: an image a Gemini model generates shows in the page while it streams (a
``blob:`` URL of its bytes) and, once the answer is read back from the store, from the
media route (fetched with the token), as the user's attachments are."""

from __future__ import annotations

from typing import Any

from tests.server import test_browser
from tests.server.test_browser import Page
from tests.server.test_process import ServeProcess

pytestmark = test_browser.pytestmark
served = test_browser.served
browser = test_browser.browser


async def test_a_generated_image_is_shown_under_its_answer(
        served: ServeProcess, browser: Any) -> None:
    page = Page(await (await browser.new_context()).new_page())
    await page.open(served.url, "token=alice-token")
    await page.settings("gemini", "gemini-2.5-flash")
    answer = await page.send("a red dot [[image]]")
    image = answer.locator("img.thumb")
    await image.wait_for()
    await page.page.wait_for_function(
        "img => img.complete && img.naturalWidth === 1", arg=await image.element_handle())
    assert (await image.get_attribute("src") or "").startswith("blob:")
    assert (await image.get_attribute("alt") or "").startswith("generated image, ")
