"""Prometheus metrics of one server (its own registry, so several apps can coexist)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from turnstate.core._events import TurnAborted, TurnCompleted


class Metrics:
    """What ``GET /metrics`` exposes.

    - ``turnstate_turns_total{strategy,outcome}``: finished turns (``completed``, or the
      abort reason such as ``cancelled`` or ``provider_failed``).
    - ``turnstate_degradations_total{reason}``: turns that could not use the stored cursor.
    - ``turnstate_provider_requests_total{provider}`` and
      ``turnstate_provider_request_bytes_total{provider}``: what turns sent to providers
      (provider calls, the bytes of their bodies);
      ``turnstate_provider_retries_total{provider}``: HTTP requests sent beyond the first
      of each call (the transport's retries and restarts; ``TurnStats.retries``).
    - ``turnstate_turn_seconds``: a histogram of whole-turn latency.
    - ``turnstate_sse_streams_active``: SSE streams open now.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.turns = Counter("turnstate_turns", "Finished turns", ["strategy", "outcome"],
                             registry=self.registry)
        self.degradations = Counter("turnstate_degradations", "Turns that did not use the "
                                    "stored cursor", ["reason"], registry=self.registry)
        self.requests = Counter("turnstate_provider_requests", "Requests sent to providers",
                                ["provider"], registry=self.registry)
        self.request_bytes = Counter("turnstate_provider_request_bytes", "Request bytes sent "
                                     "to providers", ["provider"], registry=self.registry)
        self.retries = Counter("turnstate_provider_retries", "HTTP requests sent to providers "
                               "beyond the first of each call", ["provider"],
                               registry=self.registry)
        self.turn_seconds = Histogram(
            "turnstate_turn_seconds", "Turn latency", registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120))
        self.streams = Gauge("turnstate_sse_streams_active", "Open SSE streams",
                             registry=self.registry)

        self._children: dict[tuple[Any, ...], Any] = {}

    def _child(self, metric: Counter, *values: str) -> Any:
        """``metric.labels(*values)``, kept: ``labels`` checks and locks on every call
        (a few microseconds each, three times a turn), while a child never changes."""
        key = (id(metric), *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def turn_finished(self, provider: str, event: TurnCompleted | TurnAborted,
                      seconds: float) -> None:
        outcome = "completed" if isinstance(event, TurnCompleted) else event.reason
        self._child(self.turns, event.strategy or "none", outcome).inc()
        if event.degradation:
            self._child(self.degradations, event.degradation).inc()
        self._child(self.requests, provider).inc(event.stats.requests)
        self._child(self.request_bytes, provider).inc(event.stats.request_bytes)
        if event.stats.retries:
            self._child(self.retries, provider).inc(event.stats.retries)
        self.turn_seconds.observe(seconds)

    def turn_cancelled(self, seconds: float) -> None:
        """A turn whose stream ended before its final event (the client went away)."""
        self._child(self.turns, "unknown", "cancelled").inc()
        self.turn_seconds.observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
