"""The page's generation settings (max output tokens, reasoning effort) and its finish
note: an answer cut at the token limit says so, live and once stored (issue 23)."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

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
    await page.page.fill("#max-tokens", "16")
    await page.page.select_option("#reasoning-effort", "low")
    await page.page.locator("#max-tokens").dispatch_event("change")
    saved = await page.page.evaluate("() => localStorage.getItem('turnstate.settings')")
    assert json.loads(saved)["settings"] == {"max_output_tokens": 16, "reasoning_effort": "low"}
    answer = await page.send(
        "please say these many words back to me, every one of them in order, "
        "twenty five words or more, until you are stopped")
    chip = answer.locator(".chip.finish")
    assert await chip.inner_text() == "answer cut at the token limit"
    assert await chip.get_attribute("data-finish") == "length"
    await page.toast("answer cut at the token limit")
    await page.page.fill("#max-tokens", "")
    await page.page.locator("#max-tokens").dispatch_event("change")
    plain = await page.send("hello")
    assert await plain.locator(".chip.finish").count() == 0


async def test_a_rate_limit_shows_its_retry_after_in_a_toast(
        served: ServeProcess, browser: Any) -> None:
    """Issue 23 item 4: ``TurnAborted.failure`` reaches the page, which says "rate
    limited, retry in 20 s". ``serve`` retries a 429 three times in all: the first two
    answers ask for no wait, the last for 20 s."""
    page = Page(await (await browser.new_context()).new_page())
    await page.open(served.url, "token=alice-token")
    await page.settings("openai", "gpt-4o")
    auth = {"Authorization": "Bearer alice-token"}
    async with aiohttp.ClientSession(served.url, headers=auth) as http:
        for seconds in (0, 0, 20):
            fault = {"provider": "openai", "kind": "rate_limit", "retry_after": seconds}
            assert (await http.post("/api/emulator/faults", json=fault)).status == 200
    # Every toast shown is recorded (they fade after 7 s: a loaded machine could miss one).
    await page.page.evaluate("""() => {
        window.__toasts = [];
        new MutationObserver((changes) => changes.forEach((c) => c.addedNodes.forEach(
            (n) => window.__toasts.push(n.textContent)))).observe(
            document.querySelector('#toasts'), {childList: true});
    }""")
    answer = await page.send("hello")
    await page.page.wait_for_function("() => window.__toasts.length > 0")
    toasts = await page.page.evaluate("() => window.__toasts")
    failed = [t for t in toasts if t.startswith("×Provider failed")]
    assert failed == ["×Provider failed" + "rate limited (HTTP 429, rate_limit_exceeded), "
                      "retry in 20 s"], toasts
    assert "the provider returned an error" in await answer.locator(".abort").inner_text()
