"""The login form's token field has a name a screen reader says (rough9): it had a
placeholder only, which is no label (it goes when typing starts, and WCAG 2.1's 1.3.1
and 4.1.2 ask for a programmatic name). Found here by its label, as a user of assistive
technology finds it, and used to sign in."""

from __future__ import annotations

from typing import Any

from tests.server.test_browser import browser, served  # noqa: F401
from tests.server.test_process import ServeProcess


async def test_the_token_field_is_found_by_its_label(served: ServeProcess,  # noqa: F811
                                                     browser: Any) -> None:  # noqa: F811
    page = await (await browser.new_context()).new_page()
    await page.goto(served.url)
    await page.locator("#login").wait_for(state="visible")
    field = page.get_by_label("Access token", exact=True)
    assert await field.count() == 1  # no label: 0
    assert await field.get_attribute("id") == "login-token"
    assert await field.evaluate("e => e === document.activeElement")
    await field.fill("alice-token")
    await page.get_by_role("button", name="Continue").click()
    await page.wait_for_selector("body[data-ready=true]")
