"""A question asked again from the page keeps everything it carried, in headless
chromium: Regenerate and Retry sent a stored question's inline images again but left
out its PDFs and its linked (https) images, so the model answered a different question
and the stored history lost them without a word. Retry and Save & regenerate take
the same path (`regenerate` with `storedMedia`)."""

from __future__ import annotations

import base64
from typing import Any

import aiohttp

from tests.server.test_browser import Page, browser, served  # noqa: F401
from tests.server.test_content_parts import png
from tests.server.test_process import ServeProcess

PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
PARTS = [
    {"type": "file", "mediaType": "application/pdf", "filename": "notes.pdf",
     "data": base64.b64encode(PDF).decode()},
    {"type": "image", "url": "https://example.com/cat.png"},
    {"type": "image", "mediaType": "image/png", "data": base64.b64encode(png()).decode()},
]
AUTH = {"Authorization": "Bearer alice-token"}


async def _question(http: aiohttp.ClientSession, base: str, chat: str) -> dict[str, Any]:
    view = await (await http.get(f"{base}api/chats/{chat}")).json()
    return view["messages"][0]  # type: ignore[no-any-return]


async def test_regenerate_sends_a_questions_pdf_and_linked_image_again(
        served: ServeProcess, browser: Any) -> None:  # noqa: F811
    async with aiohttp.ClientSession(headers=AUTH) as http:
        chat = (await (await http.post(served.url + "api/chats")).json())["id"]
        body = {"provider": "openai", "model": "gpt-4o", "text": "Read these", "content": PARTS}
        async with http.post(f"{served.url}api/chats/{chat}/turns", json=body) as answer:
            assert answer.status == 200
            await answer.read()
        asked = await _question(http, served.url, chat)

        page = Page(await (await browser.new_context()).new_page())
        await page.open(served.url, f"token=alice-token&chat={chat}")
        await page.settings("openai", "gpt-4o")
        first = await page.page.locator(".msg.assistant").last.get_attribute("data-turn")
        await page.page.click(".msg.assistant .regenerate")
        await page.page.wait_for_function(
            "first => { const n = document.querySelector('.msg.assistant:not(.streaming)');"
            " return n && n.dataset.turn && n.dataset.turn !== first &&"
            " !document.querySelector('#send').disabled; }", arg=first)
        again = await _question(http, served.url, chat)
        answer_text = await page.page.locator(".msg.assistant").last.inner_text()

        def kept(parts: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
            return [(p["type"], p.get("mediaType"), p.get("filename"), p.get("url"),
                     p.get("bytes")) for p in parts]

        assert kept(again["parts"]) == kept(asked["parts"])
        assert "application/pdf" in answer_text and "https://example.com/cat.png" in answer_text
        pdf = next(p for p in again["parts"] if p["type"] == "file")
        async with http.get(served.url + pdf["src"].lstrip("/")) as served_pdf:
            assert await served_pdf.read() == PDF
