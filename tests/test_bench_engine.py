"""``bench_engine``'s parts run against the code they measure: a benchmark that raises
measures nothing (its heartbeat part broke when ``LeaseKeeper.start`` took the queue of
first beats, and no test ran it)."""

from __future__ import annotations

import pytest

from benchmarks import bench_engine


async def test_heartbeat_cost_runs_and_prints_its_figures(capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    await bench_engine.heartbeat_cost(repeat=3)
    printed = capsys.readouterr().out
    for store in ("MemoryStore", "SqliteStore file"):
        assert f"{store}: heartbeat task start + stop per turn" in printed
        assert f"{store}: one lease renewal" in printed

