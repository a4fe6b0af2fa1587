"""Timing helpers shared by the benchmarks: medians of repeated runs, plain output."""

from __future__ import annotations

import asyncio
import collections
import statistics
import time
from collections.abc import Awaitable, Callable


def median_us(fn: Callable[[], object], *, repeat: int = 2000, warmup: int = 200) -> float:
    """Median wall time of ``fn()`` in microseconds."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


async def amedian_us(fn: Callable[[], Awaitable[object]], *, repeat: int = 500,
                     warmup: int = 50) -> float:
    """Median wall time of ``await fn()`` in microseconds."""
    for _ in range(warmup):
        await fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        await fn()
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


def figure(name: str, value: float, unit: str = "us", *, budget: float | None = None) -> None:
    """Print one named figure (and its budget when there is one)."""
    tail = f"   (budget {budget:g} {unit}: {'ok' if value <= budget else 'OVER'})" if budget else ""
    print(f"{name:<58} {value:>12.2f} {unit}{tail}")


def ratio(name: str, value: float, baseline: float, *, budget: float | None = None) -> None:
    result = value / baseline if baseline else float("inf")
    tail = f"   (budget {budget:g}x: {'ok' if result <= budget else 'OVER'})" if budget else ""
    print(f"{name:<58} {result:>12.2f} x{tail}")


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(main())


def error_kinds(errors: list[str]) -> None:
    """How many clients failed with each kind of error (a dropped connection is not a
    503), most frequent first."""
    kinds = collections.Counter(error.split(":", 1)[0][:90] for error in errors)
    for kind, count in kinds.most_common():
        print(f"   {count:5d} x {kind}")
