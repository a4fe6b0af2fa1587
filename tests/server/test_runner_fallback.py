"""``TurnstateRunner`` leans on aiohttp internals for JSON parser errors; an aiohttp that
moved them must still serve (plain-text refusals, a warning), never fail to start."""

from __future__ import annotations

import logging

import aiohttp
import pytest
from aiohttp import web

from turnstate.server import _runner
from turnstate.server._runner import TurnstateRunner


async def _hello(_: web.Request) -> web.Response:
    return web.Response(text="hello")


async def test_a_runner_whose_internals_moved_still_serves(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def moved(*_: object, **__: object) -> web.Server:
        raise TypeError("unexpected keyword argument")

    monkeypatch.setattr(_runner, "_JsonErrorsServer", moved)
    app = web.Application()
    app.router.add_get("/", _hello)
    runner = TurnstateRunner(app)
    with caplog.at_level(logging.WARNING, logger="turnstate"):
        await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        async with aiohttp.ClientSession() as session, \
                session.get(f"http://127.0.0.1:{port}/") as response:
            assert response.status == 200
            assert await response.text() == "hello"
    finally:
        await runner.cleanup()
    assert "stay plain text" in caplog.text
