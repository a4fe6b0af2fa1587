"""Pytest fixtures for embedders' tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from turnstate.emulators import EmulatedProviders


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
