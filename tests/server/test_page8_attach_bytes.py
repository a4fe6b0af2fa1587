"""An attachment is taken by what its bytes are, not by its name: a file named ``.png``
whose bytes are no image went on the tray and the whole message was refused at Send
with the server's words (``is not an image/png (its first bytes are 6e 6f 74 ...: ...)
(content[0].data)``, no file named, the question retried with it refused again), and a
JPEG saved as ``photo.png`` was refused the same way though it is a good image."""

from __future__ import annotations

import base64
from typing import Any

from tests.server.test_browser import Page, browser, served  # noqa: F401
from tests.server.test_process import ServeProcess

JPEG = base64.b64decode(
    "/9j/4AAQSkZJRgABAQEASABIAAD/2wBDAP//////////////////////////////////////////////////"
    "////////////////////////////////////wgALCAABAAEBAREA/8QAFBABAAAAAAAAAAAAAAAAAAAAAP/a"
    "AAgBAQABPxA=")


async def test_the_bytes_decide_what_an_attachment_is(
        served: ServeProcess, browser: Any) -> None:  # noqa: F811
    page = Page(await (await browser.new_context()).new_page())
    await page.open(served.url, "token=alice-token")
    await page.settings("openai", "gpt-4o")
    await page.page.set_input_files("#attach-file", files=[
        {"name": "fake.png", "mimeType": "image/png", "buffer": b"not a png at all"},
        {"name": "svg.webp", "mimeType": "image/webp", "buffer": b"<svg onload=alert(1)>"},
        {"name": "photo.png", "mimeType": "image/png", "buffer": JPEG}])
    await page.toast("fake.png is no PNG, JPEG, GIF or WebP image and no PDF")
    await page.toast("svg.webp is no PNG, JPEG, GIF or WebP image and no PDF")
    await page.page.locator("#attachments img[alt='photo.png']").wait_for()
    assert await page.page.locator("#attachments .attachment").count() == 1
    answer = await page.send("what is in this photo?")
    assert "image/jpeg" in await answer.inner_text()
    assert await page.page.locator("#attachments .attachment").count() == 0
