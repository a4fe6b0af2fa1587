"""The live property suite on PostgreSQL (``TURNSTATE_PROPERTY_STORE=postgres``) needs
the server: the run's schema fixture skips it without one, or fails it under CI."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _postgres_when_asked(request: pytest.FixtureRequest) -> None:
    if os.environ.get("TURNSTATE_PROPERTY_STORE") == "postgres":
        request.getfixturevalue("pg_schema")
