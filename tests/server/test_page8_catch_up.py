"""Back to a tab that was hidden: another tab or device took turns in the chat shown (or
runs one now), or the tab slept through them. The page showed the chat as it was when
the tab was hidden until the next question of its own; now coming back reads the chat
again and follows a running turn, and leaves an unchanged chat's view (and its scroll
position) alone. The API client stands for the other tab; the page is told it is seen
again with the ``visibilitychange`` event a browser sends."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.server.test_browser import Page, browser, served  # noqa: F401
from tests.server.test_process import ServeProcess

SEEN_AGAIN = "() => document.dispatchEvent(new Event('visibilitychange'))"
HANG = {"provider": "openai", "kind": "hang", "after_events": 6}


async def test_coming_back_shows_what_another_tab_did(
        served: ServeProcess, browser: Any) -> None:  # noqa: F811
    page = Page(await (await browser.new_context()).new_page())
    await page.open(served.url, "token=alice-token")
    await page.settings("openai", "gpt-4o")
    await page.send("First from this tab")
    chat = await page.page.evaluate("() => new URLSearchParams(location.hash.slice(1)).get('chat')")
    marker = "() => { document.querySelector('.msg.user').dataset.kept = 'yes'; }"
    await page.page.evaluate(marker)
    await page.page.evaluate(SEEN_AGAIN)  # nothing changed: the view is left as it is
    await page.page.wait_for_timeout(300)
    assert await page.page.locator(".msg.user[data-kept=yes]").count() == 1

    headers = {"Authorization": "Bearer alice-token"}
    async with aiohttp.ClientSession(headers=headers) as http:
        body = {"provider": "openai", "model": "gpt-4o", "text": "Asked in another tab"}
        async with http.post(served.url + f"api/chats/{chat}/turns", json=body) as answer:
            await answer.read()
        await page.page.evaluate(SEEN_AGAIN)
        other = page.page.locator(".msg.assistant", has_text="You said: Asked in another tab")
        await other.wait_for()

        assert (await http.post(served.url + "api/emulator/faults", json=HANG)).status == 200
        body["text"] = "A long one in another tab"
        async with http.post(served.url + f"api/chats/{chat}/turns", json=body) as running:
            await running.content.readline()  # the turn runs (and hangs) at the server
            await page.page.evaluate(SEEN_AGAIN)
            await page.page.locator(".msg.user", has_text="A long one in another tab").wait_for()
            await page.page.locator("#stop").wait_for()
            await page.page.click("#stop")
            await page.page.locator("#send").wait_for()
