"""The page's max-tokens field and reasoning-effort menu follow what the server takes for
the picked model (``/api/config``'s ``minOutputTokens``, ``maxOutputTokens`` and
``reasoningEfforts``, the bounds the engine checks a turn's settings against): gpt-5.1's
``none`` is offered, a limit OpenAI Responses refuses (below 16) is never sent."""

from __future__ import annotations

import json
from typing import Any

from tests.server import test_browser
from tests.server.support import Api
from tests.server.test_browser import Page
from tests.server.test_process import ServeProcess
from turnstate.core import ReasoningEffort
from turnstate.server import SERVER_REGISTRY

served = test_browser.served  # the fixtures: a real `serve` for alice and bob, chromium
browser = test_browser.browser


async def test_config_gives_each_models_settings_bounds(api: Api) -> None:
    """Every model's bounds are the registry's (the ones the engine checks)."""
    config = await api.json("GET", "/api/config")
    for provider in config["providers"]:
        takes = SERVER_REGISTRY.provider(provider["name"])
        for model in provider["models"]:
            info = SERVER_REGISTRY.models[(provider["name"], model["name"])]
            assert model["minOutputTokens"] == takes.min_output_tokens
            assert model["maxOutputTokens"] == info.max_output_tokens
            assert model["reasoningEfforts"] == [e.value for e in ReasoningEffort
                                                 if e.value in info.reasoning_efforts]


async def options(page: Page) -> list[str]:
    return list(await page.page.locator("#reasoning-effort option").evaluate_all(
        "(options) => options.map((o) => o.value)"))


async def set_tokens(page: Page, value: str) -> str:
    """Type ``value`` into the max-tokens field and leave it: what the field then holds."""
    await page.page.fill("#max-tokens", value)
    await page.page.locator("#max-tokens").dispatch_event("change")
    return str(await page.page.input_value("#max-tokens"))


async def saved(page: Page) -> Any:
    kept = await page.page.evaluate("() => localStorage.getItem('turnstate.settings')")
    return json.loads(kept)["settings"]


async def test_the_settings_offer_what_the_server_takes(
        served: ServeProcess, browser: Any) -> None:
    page = Page(await (await browser.new_context()).new_page())
    await page.open(served.url, "token=alice-token")
    await page.settings("openai", "gpt-5.1")
    assert await options(page) == ["", "none", "low", "medium", "high"]
    await page.page.select_option("#reasoning-effort", "none")
    assert await set_tokens(page, "5") == "16"  # OpenAI Responses refuses less than 16
    assert await set_tokens(page, "1000000") == "128000"
    assert await page.page.get_attribute("#max-tokens", "min") == "16"
    assert await set_tokens(page, "20") == "20"
    assert await saved(page) == {"max_output_tokens": 20, "reasoning_effort": "none"}
    answer = await page.send("hello")  # the server takes both: the turn completes
    assert await answer.locator(".abort").count() == 0
    # gpt-5 takes no `none`: the kept effort goes back to the model's default.
    await page.page.select_option("#model", "gpt-5")
    assert await options(page) == ["", "minimal", "low", "medium", "high"]
    assert await saved(page) == {"max_output_tokens": 20}
    # Anthropic takes no effort at all, and any limit from 1 up to the model's most.
    await page.settings("anthropic", "claude-sonnet-4-5")
    assert await options(page) == [""]
    assert await page.page.is_disabled("#reasoning-effort")
    assert await set_tokens(page, "5") == "5"
    assert await set_tokens(page, "64001") == "64000"
