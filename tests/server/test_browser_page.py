"""The page as a product, in headless chromium against a real ``serve``: markdown with
the XSS payloads inert, a 390 px screen, notifications that never cover the controls,
Stop and Escape, account links, login errors, paging, dark mode, the smaller defects."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import aiohttp

from tests.server import test_browser
from tests.server.test_browser import Page
from tests.server.test_process import ServeProcess

pytestmark = test_browser.pytestmark  # skips with a reason without chromium (fails in CI)
served = test_browser.served  # the fixtures: a real `serve` for alice and bob, chromium
browser = test_browser.browser

DOCS = Path(__file__).resolve().parents[2] / "docs"
STOP_TIMEOUT_MS = 90_000
"""Stop's waits: on page state, long enough for a loaded 2-core machine."""
XSS = [
    "<img src=x onerror=window.__pwned=1>",
    "[click me](javascript:window.__pwned=2)",
    "<script>window.__pwned=3</script>",
    '<a href="JaVaScRiPt:window.__pwned=4">x</a>',
    "<svg onload=window.__pwned=5></svg>",
    "<iframe src=javascript:window.__pwned=6></iframe>",
    '<details open ontoggle="window.__pwned=7">d</details>',
    "![x](x\" onerror=\"window.__pwned=8)",
    "<form><button formaction=javascript:window.__pwned=9>go</button></form>",
    "<style>body{display:none}</style><b style=color:red>styled</b>",
]


async def _page(browser: Any, served: ServeProcess, fragment: str = "token=alice-token",
                **context: Any) -> Page:
    page = Page(await (await browser.new_context(**context)).new_page())
    await page.open(served.url, fragment)
    return page


async def test_answers_render_as_markdown_and_the_xss_payloads_stay_inert(
        served: ServeProcess, browser: Any) -> None:
    page = await _page(browser, served)
    answer = await page.send("Some **bold**, a [link](https://example.com/) and\n"
                             "```\nprint(1)\n```")
    assert await answer.locator(".md strong").inner_text() == "bold"
    link = answer.locator(".md a")
    assert await link.get_attribute("href") == "https://example.com/"
    assert await link.get_attribute("rel") == "noopener noreferrer nofollow"
    assert (await answer.locator(".md .code pre").inner_text()).strip() == "print(1)"
    assert await answer.locator(".md .code button.copy").count() == 1
    dialogs: list[str] = []
    page.page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    for payload in XSS:
        await page.send(payload)
    found = await page.page.evaluate("""() => ({
        pwned: window.__pwned ?? null,
        scripts: document.querySelectorAll('#messages script, #messages iframe, '
            + '#messages svg:not(.icon), #messages form, #messages style').length,
        handlers: [...document.querySelectorAll('#messages *')].filter(n =>
            [...n.attributes].some(a => a.name.startsWith('on') || a.name === 'style'
                || a.name === 'formaction')).length,
        jsLinks: [...document.querySelectorAll('#messages a')].filter(a =>
            /^\\s*javascript:/i.test(a.getAttribute('href') || '')).length,
        hidden: getComputedStyle(document.body).display === 'none',
    })""")
    assert found == {"pwned": None, "scripts": 0, "handlers": 0, "jsLinks": 0,
                     "hidden": False}, found
    assert dialogs == []


async def test_a_390_px_screen_gets_a_drawer_and_fits(
        served: ServeProcess, browser: Any, tmp_path: Path) -> None:
    page = await _page(browser, served, viewport={"width": 390, "height": 844},
                       device_scale_factor=2, is_mobile=True, has_touch=True)
    await page.settings("openai", "gpt-4o", tools=("weather",))
    await page.page.click("#settings summary")
    await page.send("Hello from a phone: is the text readable here, line after line?")
    await page.send('[[call:weather {"city": "Lisbon"}]] And the weather in Lisbon?')
    sidebar = await page.page.locator(".sidebar").bounding_box()
    assert sidebar is not None and sidebar["x"] + sidebar["width"] <= 1  # off-screen
    widths = await page.page.evaluate("""() => ({
        page: document.documentElement.scrollWidth,
        text: document.querySelector('#text').getBoundingClientRect().width,
        message: document.querySelector('.msg.user .text').getBoundingClientRect().width,
        meter: document.querySelector('#meter').getBoundingClientRect().right,
    })""")
    assert widths["page"] <= 390 and widths["meter"] <= 390, widths
    assert widths["text"] > 200 and widths["message"] > 150, widths
    await page.page.screenshot(path=str(tmp_path / "narrow.png"))
    if os.environ.get("TURNSTATE_UPDATE_SCREENSHOT"):
        await page.page.screenshot(path=str(DOCS / "server-page-390.png"))
    await page.page.click("#menu")
    await page.page.wait_for_function(
        "() => document.querySelector('.sidebar').getBoundingClientRect().x >= 0")
    await page.page.locator(".chat-item").first.click()
    await page.page.wait_for_function("() => !document.body.classList.contains('drawer-open')")


async def test_notifications_never_cover_the_controls_collapse_and_escape_dismisses(
        served: ServeProcess, browser: Any) -> None:
    page = await _page(browser, served)
    await page.page.click("#settings summary")
    for _ in range(5):  # no chat open: the same error five times
        await page.page.click("#expire-cursor")
    await page.toast("Open a chat first")
    assert await page.page.locator(".toast").count() == 1
    assert await page.page.locator(".toast .count").inner_text() == "×5"
    for provider in ("openai", "gemini", "anthropic", "deepseek"):
        await page.page.select_option("#provider", provider)
        await page.page.click("#fail-next")
    await page.page.click("#settings summary")  # folded: the controls at their lowest
    toasts = await page.page.locator(".toast").all()
    assert len(toasts) == 4  # at most four at once
    for control in ("#send", "#text", "#settings summary"):
        box = await page.page.locator(control).bounding_box()
        assert box is not None
        for toast in toasts:
            shown = await toast.bounding_box()
            assert shown is not None
            assert shown["y"] + shown["height"] <= box["y"] or shown["y"] >= box["y"] + \
                box["height"], (control, shown, box)
    await page.page.keyboard.press("Escape")
    assert await page.page.locator(".toast").count() == 0


async def _stopped(page: Page, stop: str) -> None:
    """Stop the running turn by ``stop`` and wait, on page state only, until the stop
    request was answered and the stored answer shows the turn stopped."""
    async with page.page.expect_response(lambda r: r.url.endswith("/stop")) as answered:
        if stop == "click":
            await page.page.click("#stop")
        else:
            await page.page.keyboard.press("Escape")
    assert (await answered.value).status == 202
    await page.page.wait_for_function(
        "() => !document.querySelector('#send').disabled && "
        "!document.querySelector('.msg.streaming') && document.querySelector("
        "'.msg.assistant:last-of-type .abort')?.textContent.includes('stopped on request')")
    assert await page.page.locator("#stop").is_hidden()


async def _stall(page: Page, text: str) -> None:
    """Send ``text`` into a stalled provider and wait for Stop, with nothing over it."""
    await page.page.fill("#text", text)
    await page.page.click("#send")
    await page.page.locator("#stop").wait_for(state="visible")
    center = await page.page.evaluate("""() => {
        const r = document.querySelector('#stop').getBoundingClientRect();
        return document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2).id; }""")
    assert center == "stop"  # nothing lies over it


async def test_stop_and_escape_end_a_stalled_turn(served: ServeProcess, browser: Any) -> None:
    """Deterministic under load: every wait is on page state or on the stop request's own
    answer, with a generous timeout, never on a sleep."""
    page = await _page(browser, served)
    page.page.set_default_timeout(STOP_TIMEOUT_MS)
    await page.settings("openai", "gpt-4o")
    await page.send("first")
    auth = {"Authorization": "Bearer alice-token"}
    async with aiohttp.ClientSession(served.url, headers=auth) as http:
        for _ in range(3):
            stall = {"provider": "openai", "kind": "stall", "seconds": 300}
            assert (await http.post("/api/emulator/faults", json=stall)).status == 200
    for stop in ("click", "escape"):
        await _stall(page, f"this one stalls ({stop})")
        await _stopped(page, stop)


async def test_a_late_stop_answer_keeps_the_next_turns_stop(
        served: ServeProcess, browser: Any) -> None:
    """The answer to turn 1's stop arrives after turn 2 began (held back here): turn 2's
    Stop stays shown, and Escape still stops it."""
    page = await _page(browser, served)
    page.page.set_default_timeout(STOP_TIMEOUT_MS)
    await page.settings("openai", "gpt-4o")
    auth = {"Authorization": "Bearer alice-token"}
    async with aiohttp.ClientSession(served.url, headers=auth) as http:
        for _ in range(2):
            stall = {"provider": "openai", "kind": "stall", "seconds": 300}
            assert (await http.post("/api/emulator/faults", json=stall)).status == 200
    release, delivered = asyncio.Event(), asyncio.Event()

    async def hold(route: Any) -> None:
        if delivered.is_set() or release.is_set():  # turn 2's stop goes straight through
            await route.continue_()
            return
        response = await route.fetch()  # the server records the stop now
        await release.wait()
        await route.fulfill(response=response)
        delivered.set()

    await page.page.route("**/stop", hold)
    await _stall(page, "turn one")
    await page.page.click("#stop")
    await page.page.wait_for_function(  # turn 1 ended while its stop's answer is held
        "() => !document.querySelector('#send').disabled && "
        "!document.querySelector('.msg.streaming')")
    await _stall(page, "turn two")
    release.set()
    await delivered.wait()
    await page.page.evaluate("() => new Promise(r => setTimeout(r, 0))")  # one page task
    assert await page.page.locator("#stop").is_visible()
    await _stopped(page, "escape")


async def test_a_link_with_another_owners_token_asks_first(
        served: ServeProcess, browser: Any) -> None:
    context = await browser.new_context()
    raw = await context.new_page()
    page = Page(raw)
    await page.open(served.url, "token=alice-token")
    asked: list[str] = []

    async def refuse(dialog: Any) -> None:
        asked.append(dialog.message)
        await dialog.dismiss()

    other = await context.new_page()
    other.on("dialog", refuse)
    await other.goto(served.url + "#token=bob-token")
    await other.wait_for_selector("body[data-ready=true]")
    assert asked and '"bob" instead of "alice"' in asked[0]
    assert await other.locator("#owner").inner_text() == "alice"
    assert "token" not in other.url
    # Mid-session a hash change never switches: the token is dropped, with a notice.
    await other.evaluate("location.hash = 'token=bob-token'")
    await other.locator(".toast", has_text="Sign-in link ignored").wait_for()
    assert await other.evaluate("localStorage.getItem('turnstate.token')") == "alice-token"
    assert len(asked) == 1


async def test_a_wrong_token_at_login_says_so(served: ServeProcess, browser: Any) -> None:
    page = (await (await browser.new_context()).new_page())
    await page.goto(served.url)
    await page.locator("#login").wait_for(state="visible")
    await page.fill("#login-token", "not-a-token")
    await page.click("#login-form button")
    await page.locator("#login-error", has_text="does not know this token").wait_for()
    await page.fill("#login-token", "alice-token")
    await page.click("#login-form button")
    await page.wait_for_selector("body[data-ready=true]")


async def test_small_page_defects(served: ServeProcess, browser: Any) -> None:
    page = await _page(browser, served, color_scheme="dark")
    raw = page.page
    # A refused turn (too long) creates no empty chat.
    await raw.evaluate("n => { document.querySelector('#text').value = 'x'.repeat(n); }", 100_001)
    await raw.click("#send")
    await page.toast("the server takes at most 100,000")
    assert await raw.locator(".chat-item").count() == 0
    assert len(await raw.input_value("#text")) == 100_001
    await raw.fill("#text", "")
    # Enter while an input method composes does not send.
    await raw.fill("#text", "にほんご")
    await raw.evaluate("""() => document.querySelector('#text').dispatchEvent(new KeyboardEvent(
        'keydown', {key: 'Enter', isComposing: true, bubbles: true, cancelable: true}))""")
    assert await raw.input_value("#text") == "にほんご"
    await raw.fill("#text", "")
    # Dark mode follows the system; the favicon exists; the tool icon is drawn, not a glyph.
    background = await raw.evaluate(
        "getComputedStyle(document.documentElement).backgroundColor")
    assert background == "rgb(20, 24, 33)", background
    async with aiohttp.ClientSession(served.url) as http:
        for path in ("/favicon.ico", "/static/favicon.svg"):
            assert (await http.get(path)).status == 200
    await page.settings("openai", "gpt-4o", tools=("weather",))
    answer = await page.send('[[call:weather {"city": "Lisbon"}]] weather?')
    assert await answer.locator("details.tool summary svg.icon").count() == 1
    assert "🔧" not in await answer.inner_text()
    # The meter's label says what its band says (rounded down, never across a band).
    labels = await raw.evaluate("""async () => {
        const m = await import('/static/meter.js');
        const at = (r, s) => m.meterLabel({estimatedUsageRatio: r, severity: s,
            estimatedInputTokens: 1, contextLimit: 2, source: 'estimate'}).split(' · ')[0];
        return [at(0.695, 'normal'), at(0.70, 'info'), at(0.965, 'danger'), at(0.9999, 'critical')];
    }""")
    assert labels == ["context 69%", "context 70%", "context 96%", "context 99%"]
    # Regenerate an answer: the same question again, one answer instead of two.
    count = await raw.locator(".msg.assistant").count()
    turn = await answer.get_attribute("data-turn")
    await answer.locator("button.regenerate").click()
    await raw.wait_for_function(
        "t => !document.querySelector(`[data-turn='${t}']`) && "
        "!document.querySelector('.msg.streaming') && !document.querySelector('#send').disabled",
        arg=turn)
    assert await raw.locator(".msg.assistant").count() == count
    # Edit and regenerate: the edited question is asked again, what followed is gone.
    first = raw.locator(".msg.user").first
    await first.locator("button.edit").click()
    await first.locator("textarea").fill("Edited question")
    await first.locator("button.save-regenerate").click()
    await raw.locator(".msg.assistant:not(.streaming)", has_text="You said: Edited question") \
        .wait_for()
    await raw.wait_for_function("() => !document.querySelector('#send').disabled")
    assert await raw.locator(".msg.user").count() == 1


async def test_older_messages_load_on_scroll(served: ServeProcess, browser: Any) -> None:
    auth = {"Authorization": "Bearer alice-token"}
    async with aiohttp.ClientSession(served.url, headers=auth) as http:
        chat = (await (await http.post("/api/chats")).json())["id"]
        for index in range(30):
            async with http.post(f"/api/chats/{chat}/turns", json={
                    "provider": "openai", "model": "gpt-4o", "text": f"q{index}"}) as r:
                await r.read()
    page = await _page(browser, served, f"token=alice-token&chat={chat}")
    assert await page.page.locator(".msg").count() == 50
    await page.page.evaluate("document.querySelector('#messages').scrollTop = 0")
    await page.page.wait_for_function("() => document.querySelectorAll('.msg').length === 60")
    assert "q0" in await page.page.locator(".msg.user").first.inner_text()
