"""A ``turnstate serve`` process tunes its garbage collector (issue 26)."""

from __future__ import annotations

import gc

import pytest

from turnstate.server import _serve
from turnstate.server._serve import YOUNG_THRESHOLD, ServeOptions, run_server, tune_collector


def test_the_collector_leaves_startup_objects_alone_and_young_ones_longer() -> None:
    before = gc.get_threshold()
    try:
        tune_collector()
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 20, 20)
        assert gc.get_freeze_count() > 10_000  # the imported modules, classes, functions
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_run_server_tunes_the_collector_before_serving(monkeypatch: pytest.MonkeyPatch,
                                                       ) -> None:
    calls: list[str] = []

    async def serve(options: ServeOptions) -> int:
        calls.append("serve")
        return 0

    monkeypatch.setattr(_serve, "tune_collector", lambda: calls.append("tune"))
    monkeypatch.setattr(_serve, "serve", serve)
    assert run_server(ServeOptions()) == 0
    assert calls == ["tune", "serve"]
