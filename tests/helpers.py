"""Small helpers shared by the test modules."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from turnstate.providers import SseEvent
from turnstate.providers._boundary import provider_batches
from turnstate.providers._protocol import (
    HttpRequest,
    ProviderAdapter,
    ProviderEvent,
    ProviderResponse,
    Transport,
)


def chunk_events(path: Path, *, event_key: str | None = "type") -> list[SseEvent]:
    """Rebuild SSE events from a ``*.chunks.txt`` file (one ``data:`` payload per line).

    The recorded files keep only the data; the event name is restored from the payload's
    ``event_key`` field (``type`` for OpenAI and Anthropic, ``event_type`` for Gemini,
    None for Chat Completions, which sends no ``event:`` lines).
    """
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        name = "message"
        if event_key is not None:
            try:
                payload = json.loads(line)
            except ValueError:
                payload = None
            if isinstance(payload, dict) and isinstance(payload.get(event_key), str):
                name = payload[event_key]
        events.append(SseEvent(data=line, event=name))
    return events


async def provider_stream(
    transport: Transport, adapter: ProviderAdapter, request: HttpRequest
) -> AsyncGenerator[ProviderEvent | ProviderResponse, None]:
    """``provider_batches`` one event at a time: a call's events, then its response."""
    async with aclosing(provider_batches(transport, adapter, request)) as items:
        async for item in items:
            if isinstance(item, list):
                for event in item:
                    yield event
            else:
                yield item


def record_calls(monkeypatch: pytest.MonkeyPatch, real: Callable[..., Any],
                 *places: tuple[object, str]) -> list[Any]:
    """Patch ``real`` at each ``(owner, name)`` of ``places`` with a wrapper that calls it
    and records its first argument; the list of those arguments, in call order (the
    count tests of issue 26: what a turn no longer does)."""
    seen: list[Any] = []

    def recording(first: Any, *rest: Any) -> Any:
        seen.append(first)
        return real(first, *rest)

    for owner, name in places:
        monkeypatch.setattr(owner, name, recording)
    return seen


def count_inits(monkeypatch: pytest.MonkeyPatch, classes: tuple[type, ...]) -> list[str]:
    """Patch each of ``classes``' ``__init__`` to record the class's name before running;
    the list of names, in call order (what a turn still builds through attrs' init)."""
    built: list[str] = []

    def counting(cls: type) -> Any:
        init = cls.__init__

        def counted(self: object, *args: Any, **kwargs: Any) -> None:
            built.append(cls.__name__)
            init(self, *args, **kwargs)

        return counted

    for cls in classes:
        monkeypatch.setattr(cls, "__init__", counting(cls))
    return built
