"""An image sent from the page (issue 23 item 2): attached with the button, pasted or
dropped; the emulator's echo says it arrived, and the stored message shows its thumbnail,
fetched with the token and shown through a blob: URL the page's policy allows."""

from __future__ import annotations

from typing import Any

from tests.server import test_browser
from tests.server.test_browser import Page
from tests.server.test_content_parts import png
from tests.server.test_process import ServeProcess

pytestmark = test_browser.pytestmark
served = test_browser.served  # the fixtures: a real `serve` for alice and bob, chromium
browser = test_browser.browser

THUMB_LOADED = """sel => [...document.querySelectorAll(sel)].some(
    (img) => img.complete && img.naturalWidth > 0)"""


async def test_an_attached_image_reaches_the_model_and_shows_as_a_thumbnail(
        served: ServeProcess, browser: Any) -> None:
    page = Page(await (await browser.new_context()).new_page())
    refused: list[str] = []
    page.page.on("console", lambda m: refused.append(m.text) if "Refused" in m.text else None)
    await page.open(served.url, "token=alice-token")
    await page.settings("openai", "gpt-4o")
    picture = png(4, 3)
    await page.page.set_input_files("#attach-file", files=[
        {"name": "dot.png", "mimeType": "image/png", "buffer": picture}])
    assert await page.page.locator("#attachments .thumb").count() == 1
    answer = await page.send("what is this?")
    assert f"an image/png of {len(picture):,} bytes" in await answer.inner_text()
    assert await page.page.locator("#attachments .thumb").count() == 0  # sent, tray empty
    thumb = page.page.locator(".msg.user .thumb")
    await page.page.wait_for_function(THUMB_LOADED, arg=".msg.user .thumb")
    assert (await thumb.get_attribute("src") or "").startswith("blob:")
    assert await thumb.evaluate("img => [img.naturalWidth, img.naturalHeight]") == [4, 3]
    # Regenerate asks the question again with its image (the emulator echoes it again).
    first = await page.page.query_selector(".msg.assistant")
    await page.page.click(".msg.assistant .regenerate")
    await page.page.wait_for_function(  # the first answer is gone, the new one stored
        "first => !first.isConnected && document.querySelectorAll('.msg').length === 2 && "
        "!document.querySelector('.msg.streaming') && !document.querySelector('#send').disabled "
        "&& document.querySelector('.msg.assistant .regenerate')", arg=first)
    again = page.page.locator(".msg.assistant").last
    assert f"an image/png of {len(picture):,} bytes" in await again.inner_text()
    await page.page.wait_for_function(THUMB_LOADED, arg=".msg.user .thumb")
    assert await page.page.locator("#attachments .thumb").count() == 0
    assert refused == []  # the page's Content-Security-Policy let everything load


async def test_paste_and_drop_attach_and_other_files_are_refused(
        served: ServeProcess, browser: Any) -> None:
    page = Page(await (await browser.new_context()).new_page())
    await page.open(served.url, "token=alice-token")
    picture = list(png())
    await page.page.evaluate("""bytes => {
        const file = (name, type) => new File([new Uint8Array(bytes)], name, { type });
        const pasted = new DataTransfer();
        pasted.items.add(file("pasted.png", "image/png"));
        document.querySelector('#text').dispatchEvent(new ClipboardEvent("paste",
            { clipboardData: pasted, bubbles: true, cancelable: true }));
        const dropped = new DataTransfer();
        dropped.items.add(file("dropped.png", "image/png"));
        dropped.items.add(file("notes.txt", "text/plain"));
        document.querySelector('#composer').dispatchEvent(new DragEvent("drop",
            { dataTransfer: dropped, bubbles: true, cancelable: true }));
    }""", picture)
    # The page checks each file's bytes before the tray shows it (asynchronously, in
    # order): wait for the dropped picture too, then read the names.
    await page.page.wait_for_function(
        "() => document.querySelectorAll('#attachments .thumb').length >= 2")
    names = await page.page.locator("#attachments .thumb").evaluate_all(
        "imgs => imgs.map((img) => img.alt)")
    assert names == ["pasted.png", "dropped.png"]
    await page.toast("only PNG, JPEG, GIF or WebP images")
    await page.page.locator("#attachments .remove").first.click()
    assert await page.page.locator("#attachments .thumb").count() == 1
