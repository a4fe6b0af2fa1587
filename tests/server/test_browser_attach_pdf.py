"""PDFs from the page: the server takes them (a turn's ``file`` part), the page only
took images; what it refuses, it says before sending, in sizes a person reads."""

from __future__ import annotations

import json
from typing import Any

from tests.server import test_browser
from tests.server.test_browser import Page
from tests.server.test_process import ServeProcess

pytestmark = test_browser.pytestmark
served = test_browser.served
browser = test_browser.browser

PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


async def _page(browser: Any, served: ServeProcess) -> Page:
    page = Page(await (await browser.new_context()).new_page())
    await page.open(served.url, "token=alice-token")
    return page


async def test_an_attached_pdf_reaches_the_model_and_is_listed_by_name(
        served: ServeProcess, browser: Any) -> None:
    page = await _page(browser, served)
    await page.settings("openai", "gpt-4o")
    await page.page.set_input_files("#attach-file", files=[
        {"name": "notes.pdf", "mimeType": "application/pdf", "buffer": PDF}])
    assert await page.page.locator("#attachments .doc").inner_text() == "notes.pdf"
    answer = await page.send("summarise this")
    assert "application/pdf" in await answer.inner_text()
    assert "notes.pdf" in await page.page.locator(".msg.user .attached").inner_text()


async def test_a_pdf_without_a_type_is_taken_and_oversize_or_empty_files_are_explained(
        served: ServeProcess, browser: Any) -> None:
    page = await _page(browser, served)
    await page.page.evaluate("""pdf => {
        const dropped = new DataTransfer();
        dropped.items.add(new File([new Uint8Array(pdf)], "scan.PDF", { type: "" }));
        dropped.items.add(new File([], "empty.png", { type: "image/png" }));
        dropped.items.add(new File([new Uint8Array(21 * 1024 * 1024)], "huge.pdf",
                                   { type: "application/pdf" }));
        document.querySelector('#composer').dispatchEvent(new DragEvent("drop",
            { dataTransfer: dropped, bubbles: true, cancelable: true }));
    }""", list(PDF))
    assert await page.page.locator("#attachments .doc").inner_text() == "scan.PDF"
    await page.toast("empty.png is empty")
    await page.toast("huge.pdf (21.0 MiB): a message carries at most 20 MiB")


async def test_a_model_that_takes_no_pdf_refuses_it_and_the_attachment_stays(
        served: ServeProcess, browser: Any) -> None:
    page = await _page(browser, served)
    await page.page.click("#settings summary")
    await page.page.select_option("#provider", "deepseek")
    await page.page.set_input_files("#attach-file", files=[
        {"name": "notes.pdf", "mimeType": "application/pdf", "buffer": PDF}])
    await page.page.fill("#text", "read this")
    await page.page.click("#send")
    await page.toast("Turn refused")
    assert "content" in await page.page.locator(".toast").first.inner_text()
    assert await page.page.locator("#attachments .doc").inner_text() == "notes.pdf"
    assert await page.page.locator("#text").input_value() == "read this"


async def test_the_attachment_limit_is_the_server_s(
        served: ServeProcess, browser: Any) -> None:
    """The page took 20 MiB whatever the server's engine takes (``/api/config`` names it)."""
    page = Page(await (await browser.new_context()).new_page())

    async def small_limit(route: Any) -> None:
        answer = await route.fetch()
        config = await answer.json()
        assert config["limits"]["maxInlineBytes"] == 20 * 1024 * 1024
        config["limits"]["maxInlineBytes"] = 512 * 1024
        await route.fulfill(response=answer, body=json.dumps(config))

    await page.page.route("**/api/config", small_limit)
    await page.open(served.url, "token=alice-token")
    await page.page.set_input_files("#attach-file", files=[
        {"name": "big.pdf", "mimeType": "application/pdf", "buffer": PDF + bytes(600_000)}])
    await page.toast("big.pdf (0.6 MiB): a message carries at most 0.5 MiB")
    assert await page.page.locator("#attachments").is_hidden()
