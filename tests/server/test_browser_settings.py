"""The page's generation settings (max output tokens, reasoning effort) and its finish
note: an answer cut at the token limit says so, live and once stored (issue 23)."""

from __future__ import annotations

import json
from typing import Any

from tests.server import test_browser
from tests.server.test_browser import Page
from tests.server.test_process import ServeProcess

served = test_browser.served  # the fixtures: a real `serve` for alice and bob, chromium
browser = test_browser.browser


async def test_a_length_stop_is_shown_and_the_settings_reach_the_turn(
        served: ServeProcess, browser: Any) -> None:
    page = Page(await (await browser.new_context()).new_page())
    await page.open(served.url, "token=alice-token")
    await page.settings("openai", "gpt-5")
    await page.page.fill("#max-tokens", "3")
    await page.page.select_option("#reasoning-effort", "low")
    await page.page.locator("#max-tokens").dispatch_event("change")
    saved = await page.page.evaluate("() => localStorage.getItem('turnstate.settings')")
    assert json.loads(saved)["settings"] == {"max_output_tokens": 3, "reasoning_effort": "low"}
    answer = await page.send("please say these many words back to me")
    chip = answer.locator(".chip.finish")
    assert await chip.inner_text() == "answer cut at the token limit"
    assert await chip.get_attribute("data-finish") == "length"
    await page.toast("answer cut at the token limit")
    await page.page.fill("#max-tokens", "")
    await page.page.locator("#max-tokens").dispatch_event("change")
    plain = await page.send("hello")
    assert await plain.locator(".chip.finish").count() == 0
