"""Pytest fixtures for embedders' tests."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, asynccontextmanager

import pytest_asyncio

from turnstate.core import TurnEvent
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine
from turnstate.providers import AiohttpTransport
from turnstate.storage import MemoryStore


@pytest_asyncio.fixture
async def emulated_providers() -> AsyncIterator[EmulatedProviders]:
    """The five provider emulators on free loopback ports, stopped after the test::

        # conftest.py
        from turnstate.testing import emulated_providers  # noqa: F401

        async def test_a_turn(emulated_providers):
            engine = TurnEngine(MemoryStore(), emulated_providers.adapters, transport)
    """
    async with EmulatedProviders() as stack:
        yield stack


@pytest_asyncio.fixture
async def emulated_engine(
        emulated_providers: EmulatedProviders) -> AsyncIterator[TurnEngine]:
    """A ``TurnEngine`` on a fresh ``MemoryStore``, the emulators' adapters and a
    transport that never sleeps between retries, closed after the test (the emulators
    are ``emulated_providers``, the same test's, to queue faults on)::

        from turnstate.testing import emulated_engine, emulated_providers  # noqa: F401

        async def test_a_turn(emulated_engine):
            chat = await emulated_engine.store.create_chat(owner="me")
            events = await turn_events(emulated_engine.run_turn(chat.id, TurnInput(...)))
            assert events[-1].type == "turn_completed"
    """
    async with engine_on(emulated_providers) as engine:
        yield engine


@asynccontextmanager
async def engine_on(providers: EmulatedProviders) -> AsyncIterator[TurnEngine]:
    """``emulated_engine``'s engine: closed (its detached turns ended ``cancelled``)
    before its transport."""
    async with AiohttpTransport(sleep=_no_sleep) as transport, \
            TurnEngine(MemoryStore(), providers.adapters, transport) as engine:
        yield engine


async def turn_events(events: AsyncIterator[TurnEvent]) -> list[TurnEvent]:
    """Every event of a turn (``run_turn``'s iterator, or any), iterated inside
    ``aclosing`` so a failed assertion of the caller never leaves the turn holding its
    chat."""
    if not isinstance(events, AsyncGenerator):
        return [event async for event in events]
    async with aclosing(events) as iterator:
        return [event async for event in iterator]


async def _no_sleep(_seconds: float) -> None:
    return None
