"""``/healthz`` answers 503 within ``HEALTH_SECONDS`` when the store does not answer (a
silent database took the store's own 35 s, measured through the proxy), and 200 again
once it does."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.server.support import Api
from turnstate.server import _routes

BOUND = 0.2
SLACK = 2.0  # a loaded machine's loop


async def test_a_silent_store_is_a_503_within_the_health_bound(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_routes, "HEALTH_SECONDS", BOUND, raising=False)
    entered = asyncio.Event()
    real = api.services.store.list_chats

    async def silent(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        await asyncio.Event().wait()  # a database that never answers

    monkeypatch.setattr(api.services.store, "list_chats", silent)
    started = time.monotonic()
    async with asyncio.timeout(BOUND + SLACK):
        response = await api.client.get("/healthz")
    assert entered.is_set()
    assert response.status == 503 and (await response.json())["status"] == "unavailable"
    print(f"\n/healthz with a silent store: 503 after {time.monotonic() - started:.2f} s")
    monkeypatch.setattr(api.services.store, "list_chats", real)
    assert (await api.client.get("/healthz")).status == 200
