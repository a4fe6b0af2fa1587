"""An upstream that redirects (a relay, a compromised ``base_url``): to another host, or
to plain http. The transport follows no redirect, so no API key header (``Authorization``,
``x-api-key``, ``x-goog-api-key``) ever reaches the other origin; the turn aborts
``provider_failed`` naming the status. A guard: turning ``allow_redirects`` on fails it."""

from __future__ import annotations

import pytest
from aiohttp import web

from tests.engine.support import FakeClock, collect, make_turn
from tests.faults.hostile import _loopback
from tests.faults.rig import quick_transport
from turnstate.emulators._emulated import kind_of
from turnstate.engine import TurnEngine
from turnstate.storage import MemoryStore

MODELS = {"openai": "gpt-4o", "gemini": "gemini-2.5-flash", "openai-compatible": "gpt-4o-mini",
          "deepseek": "deepseek-chat", "anthropic": "claude-sonnet-4-5"}
KEY = "sk-attack7-redirected-key-0123456789"
REDIRECTS = (301, 302, 303, 307, 308)


@pytest.mark.parametrize("provider", sorted(MODELS))
@pytest.mark.parametrize("status", REDIRECTS)
async def test_a_redirect_is_not_followed_and_the_key_goes_nowhere(
        provider: str, status: int) -> None:
    elsewhere: list[dict[str, str]] = []  # the other origin's requests, headers and all

    async def other_host(request: web.Request) -> web.StreamResponse:
        elsewhere.append(dict(request.headers))
        return web.Response(status=200, text="data: {}\n\n", content_type="text/event-stream")

    store = MemoryStore(clock=FakeClock())
    chat = await store.create_chat(owner="redirects")
    async with _loopback(other_host) as target:
        async def redirecting(request: web.Request) -> web.StreamResponse:
            await request.read()
            return web.Response(status=status, headers={"Location": target + request.path_qs})

        async with _loopback(redirecting) as base_url, quick_transport() as transport:
            adapter = kind_of(provider).adapter(base_url=base_url, api_key=KEY)
            engine = TurnEngine(store, {provider: adapter}, transport, clock=FakeClock())
            outcome = await collect(engine.run_turn(chat.id, make_turn(
                "hi", provider=provider, model=MODELS[provider])))
    final = outcome.final
    assert final.type == "turn_aborted" and final.reason == "provider_failed"
    assert f"HTTP {status}" in (final.detail or ""), final.detail
    assert elsewhere == []  # not one request, so not one key, reached the other origin
    assert (await store.load_chat(chat.id)).active_turn_id is None
