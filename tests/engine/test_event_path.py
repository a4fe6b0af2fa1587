"""How many async generators an event crosses on its way from the transport's SSE
decoding to the consumer of ``run_turn`` (issue 26): each level costs a resumption per
event. The frames on the stack while the decoder runs are counted: every async
generator between the decoder and the consumer is one of them."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.engine.support import collect, make_turn
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine
from turnstate.providers import _transport
from turnstate.providers._protocol import SseEvent
from turnstate.providers._sse import SseDecoder
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore

EXPECTED = ["TurnLife.run", "TurnLife._drive", "TurnSteps.call", "provider_stream",
            "AiohttpTransport.stream"]
"""The event path, consumer side first: the lifecycle's two levels, the call step, the
providers' boundary (parser, restarts) and the transport (SSE decoding, retries)."""


def _generators_above(frame: Any) -> list[str]:
    """The async generators on the stack above ``frame``, outermost first."""
    names: list[str] = []
    while frame is not None:
        if frame.f_code.co_flags & inspect.CO_ASYNC_GENERATOR:
            names.append(frame.f_code.co_qualname)
        frame = frame.f_back
    return names[::-1]


@contextmanager
def decoder_stacks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """The async generators on the stack each time the transport's decoder is fed."""
    stacks: list[list[str]] = []

    class Recording(SseDecoder):
        def feed(self, chunk: bytes) -> list[SseEvent]:
            stacks.append(_generators_above(sys._getframe(1)))
            return super().feed(chunk)

    monkeypatch.setattr(_transport, "SseDecoder", Recording)
    yield stacks


async def test_an_event_crosses_five_generators(monkeypatch: pytest.MonkeyPatch) -> None:
    """The transport decodes inside its own retry loop: no per-attempt generator (it
    was a sixth level: ``AiohttpTransport._attempt``)."""
    async with EmulatedProviders() as stack, AiohttpTransport() as transport:
        store = MemoryStore()
        engine = TurnEngine(store, stack.adapters, transport)
        chat = await store.create_chat(owner="path")
        await collect(engine.run_turn(chat.id, make_turn("hello")))
        with decoder_stacks(monkeypatch) as stacks:
            outcome = await collect(engine.run_turn(chat.id, make_turn("again")))
    assert outcome.final.strategy == "cursor"
    assert stacks and all(found == EXPECTED for found in stacks)
