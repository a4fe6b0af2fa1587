"""The page in a real browser: Debian's chromium, headless, driven by playwright, against a
real ``turnstate serve`` process with the emulators.

Skips with a reason where chromium (or playwright) is missing, except under ``CI=true``,
where a missing browser fails the suite.

One chromium serves the whole run (starting playwright's driver and the browser took
~1.5 s a test under load, for ~50 tests); each test gets its own contexts, closed after
it, and its own ``serve``. Playwright's objects belong to the loop that made them, so
the tests that take ``browser`` run on the session's loop (``tests/server/conftest.py``
starts the browser and moves them there), and so must their async fixtures: declare them
``@pytest_asyncio.fixture(loop_scope="session")``, as ``served`` below.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests import pg_support
from tests.server.test_process import ServeProcess, start_serve

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
TIMEOUT_MS = 15_000
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "server-page.png"


def _browser_missing() -> str | None:
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    if not (os.access(CHROMIUM, os.X_OK) or shutil.which("chromium")):
        return f"chromium not found at {CHROMIUM} (apt-get install chromium)"
    return None


_MISSING = _browser_missing()
if _MISSING and pg_support.in_ci():
    raise RuntimeError(f"browser tests cannot run in CI: {_MISSING}")
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=_MISSING or "")


@pytest_asyncio.fixture(loop_scope="session")
async def served(tmp_path: Path) -> AsyncIterator[ServeProcess]:
    (tmp_path / "tokens").write_text("alice: alice-token\nbob: bob-token\n")
    process = await start_serve(tmp_path, "--tokens", str(tmp_path / "tokens"))
    try:
        yield process
    finally:
        assert await process.stop() == 0


class Contexts:
    """The run's chromium as one test sees it: ``new_context`` as the browser's, and
    every context the test opened closed after it (its pages, storage and handlers)."""

    def __init__(self, launched: Any) -> None:
        self.launched = launched
        self.opened: list[Any] = []

    async def new_context(self, **options: Any) -> Any:
        context = await self.launched.new_context(**options)
        self.opened.append(context)
        return context

    async def close(self) -> None:
        for context in self.opened:
            await context.close()


@pytest_asyncio.fixture(loop_scope="session")
async def browser(chromium: Any) -> AsyncIterator[Contexts]:
    assert chromium.is_connected(), "the run's chromium is gone"
    contexts = Contexts(chromium)
    try:
        yield contexts
    finally:
        await contexts.close()


def launch_options() -> dict[str, Any]:
    """What ``chromium.launch`` is given (the run's one browser, ``tests/server/conftest``)."""
    path = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    return {"executable_path": path, "headless": True, "args": ARGS}


class Page:
    """The chat page as a user sees it."""

    def __init__(self, page: Any) -> None:
        self.page = page
        page.set_default_timeout(TIMEOUT_MS)
        page.on("dialog", lambda dialog: dialog.accept())

    async def open(self, url: str, fragment: str) -> None:
        await self.page.goto(url + "#" + fragment)
        await self.page.wait_for_selector("body[data-ready=true]")

    async def settings(self, provider: str, model: str, prompt: str = "",
                       tools: tuple[str, ...] = ()) -> None:
        page = self.page
        if await page.locator("#settings").get_attribute("open") is None:
            await page.click("#settings summary")
        await page.select_option("#provider", provider)
        await page.select_option("#model", model)
        await page.fill("#system-prompt", prompt)
        for box in await page.locator("#tools input").all():
            await box.set_checked(await box.get_attribute("value") in tools)

    async def send(self, text: str) -> Any:
        """Send ``text`` and wait until the turn's answer is rendered from the store."""
        count = await self.page.locator(".msg.assistant:not(.streaming)").count()
        await self.page.fill("#text", text)
        await self.page.click("#send")
        await self.page.wait_for_function(
            "n => document.querySelectorAll('.msg.assistant:not(.streaming)').length > n "
            "&& !document.querySelector('.msg.streaming') && !document.querySelector('#send')"
            ".disabled", arg=count)
        return self.page.locator(".msg.assistant").last

    async def toast(self, words: str) -> None:
        await self.page.locator(".toast", has_text=words).first.wait_for()


async def test_the_page_scenario(served: ServeProcess, browser: Any, tmp_path: Path) -> None:
    context = await browser.new_context(viewport={"width": 1280, "height": 860})
    page = Page(await context.new_page())
    await page.open(served.url, "token=alice-token")
    assert await page.page.locator("#owner").inner_text() == "alice"

    # A streamed answer appears.
    await page.settings("openai", "gpt-4o", prompt="You are terse.", tools=("weather",))
    answer = await page.send("Hello there")
    assert "You said: Hello there" in await answer.inner_text()
    assert "replay" in await answer.locator(".chip.strategy-replay").inner_text()

    # A tool loop shows its tool call, folded, with the result inside.
    answer = await page.send('[[call:weather {"city": "Lisbon"}]] Weather in Lisbon?')
    tool = answer.locator("details.tool[data-tool=weather]")
    assert "weather(" in await tool.locator("summary").inner_text()
    assert "sunny" in await tool.locator(".tool-result").text_content()
    assert await answer.locator(".chip.strategy-cursor").count() == 1
    # Each turn shows its cost, the chat its total (list price, gpt-4o is priced).
    assert (await answer.locator(".chip.cost").inner_text()).startswith("$")
    total = await page.page.locator("#chat-cost").inner_text()
    assert total.startswith("$") and total.endswith("so far")
    await page.page.screenshot(path=str(tmp_path / "cost.png"))

    # Switching the system prompt: the toast names the reason in plain words.
    await page.settings("openai", "gpt-4o", prompt="You are chatty.", tools=("weather",))
    await page.send("And now?")
    await page.toast("replayed because the system prompt changed")

    # The emulator expires the cursor: degradation toast; the next turn is back on it.
    await page.page.click("#expire-cursor")
    await page.toast("forgot this chat's cursor")
    answer = await page.send("Still there?")
    await page.toast("the cursor expired")
    assert "cursor_expired" in await answer.locator(".chip.degraded").inner_text()
    answer = await page.send("Good.")
    assert await answer.locator(".chip.strategy-cursor").count() == 1

    # An aborted turn shows why and offers Retry; Retry replaces the failed answer (no
    # second copy of the question, no Retry button left behind).
    await page.page.click("#fail-next")
    await page.toast("request will fail")
    answer = await page.send("This one fails")
    assert "provider returned an error" in await answer.locator(".abort").inner_text()
    counts = [await page.page.locator(f".msg.{role}").count() for role in ("user", "assistant")]
    await answer.locator("button.retry").click()
    await page.page.wait_for_function(
        "() => !document.querySelector('.msg.aborted') && "
        "!document.querySelector('.msg.streaming') && !document.querySelector('#send').disabled")
    last = page.page.locator(".msg.assistant").last
    assert "You said: This one fails" in await last.inner_text()
    assert await page.page.locator("button.retry").count() == 0
    assert counts == [await page.page.locator(f".msg.{role}").count()
                      for role in ("user", "assistant")]

    # Edit a user message: the stored cursor is cleared, the next turn replays.
    first_user = page.page.locator(".msg.user").first
    await first_user.locator("button.edit").click()
    await first_user.locator("textarea").fill("Hello again")
    await first_user.locator("button.save").click()
    await page.toast("Message edited")
    assert await page.page.locator("#continuation").inner_text() == "no stored cursor"
    await page.page.locator(".chat-item.active", has_text="Hello again").wait_for()

    # A long conversation on a small-context model turns the meter to warning colour.
    await page.settings("openai-compatible", "demo-small-context", prompt="You are terse.")
    severity = "normal"
    for index in range(30):
        ratio = float(await page.page.locator("#meter").get_attribute("data-ratio") or 0)
        room = max(40, int((0.885 - ratio) * 2048 * 4 * 0.6))
        await page.send(f"note {index}: " + "lorem ipsum " * (min(room, 900) // 12))
        severity = await page.page.locator("#meter").get_attribute("data-severity") or ""
        if severity not in {"normal", "info"}:
            break
    assert severity == "warning"
    fill = await page.page.eval_on_selector("#meter-fill",
                                            "n => getComputedStyle(n).backgroundColor")
    assert fill == "rgb(245, 159, 0)"  # --warning
    assert "reported by provider" in await page.page.locator("#meter-label").inner_text()
    await page.page.click("#settings summary")  # fold the settings for the picture
    await page.page.keyboard.press("Escape")  # and dismiss the notifications
    await page.page.screenshot(path=str(tmp_path / "page.png"))
    assert (tmp_path / "page.png").stat().st_size > 10_000
    if os.environ.get("TURNSTATE_UPDATE_SCREENSHOT"):
        await page.page.screenshot(path=str(SCREENSHOT))

    # Bytes per turn come from the store: a fresh browser (empty localStorage) shows them.
    chat_id = page.page.url.split("chat=")[1]
    fresh = Page(await (await browser.new_context()).new_page())
    await fresh.open(served.url, f"token=alice-token&chat={chat_id}")
    await fresh.page.locator(".msg.assistant").first.wait_for()
    chips = await fresh.page.locator(".msg.assistant .chip.bytes").all_inner_texts()
    assert len(chips) == await fresh.page.locator(".msg.assistant:not(.aborted)").count()
    assert any(c.endswith("bytes in 2 request(s)") for c in chips), chips  # the tool loop

    # Another owner opening this chat's id sees "not found".
    other = Page(await (await browser.new_context()).new_page())
    await other.open(served.url, f"token=bob-token&chat={chat_id}")
    await other.page.locator("#not-found").wait_for()
    assert await other.page.locator("#chat-title").inner_text() == "Not found"
    assert await other.page.locator(".msg").count() == 0
    assert await other.page.locator(".chat-item").count() == 0
