"""Storage fixtures: one parametrised fixture gives every test each backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.storage.support import BACKENDS, Backend, ManualClock


@pytest.fixture(params=list(BACKENDS))
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """A fresh store of each backend, with a manual clock and access to its raw rows."""
    if request.param == "postgres":
        request.getfixturevalue("pg_schema")
    async with BACKENDS[request.param](tmp_path, ManualClock()) as opened:
        yield opened
