"""Test-wide configuration: hypothesis profiles and the recorded-fixture location."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests import pg_support

# `ci` runs enough examples to matter (and prints statistics); `dev` is quick for local
# runs; `deep` is for a long soak (TURNSTATE_HYPOTHESIS_PROFILE=deep python -m pytest).
settings.register_profile("ci", max_examples=500, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=100, deadline=None, print_blob=True)
settings.register_profile("deep", max_examples=5000, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
# `postgres` runs the live property suite on PostgreSQL in CI with a modest count
# (TURNSTATE_PROPERTY_STORE=postgres TURNSTATE_HYPOTHESIS_PROFILE=postgres).
settings.register_profile("postgres", max_examples=50, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
PROFILE = os.environ.get("TURNSTATE_HYPOTHESIS_PROFILE") or (
    "ci" if os.environ.get("CI", "").lower() in {"1", "true", "yes"} else "dev"
)
settings.load_profile(PROFILE)

SHARED_DIR = Path(
    os.environ.get("TURNSTATE_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared")
)
RECORDED_DIR = SHARED_DIR / "fixtures" / "recorded"
DATA_DIR = Path(__file__).resolve().parent / "data"


def pytest_configure(config: pytest.Config) -> None:
    if PROFILE in {"ci", "deep", "postgres"}:
        config.option.hypothesis_show_statistics = True


def pytest_report_header(config: pytest.Config) -> str:
    where = RECORDED_DIR if RECORDED_DIR.is_dir() else "absent (recorded-fixture tests skip)"
    return f"hypothesis profile: {PROFILE}; recorded fixtures: {where}"


@pytest.fixture
def recorded_dir() -> Path:
    """``shared/fixtures/recorded``; tests that need it skip when it is absent."""
    if not RECORDED_DIR.is_dir():
        pytest.skip(f"recorded provider fixtures not found at {RECORDED_DIR} "
                    "(set TURNSTATE_SHARED_DIR to the shared/ folder)")
    return RECORDED_DIR


@pytest.fixture(scope="session")
def pg_schema() -> Iterator[str]:
    """This run's PostgreSQL schema name (``pg_support.SCHEMA``), dropped at the end.

    Skips the test when no server answers at ``TURNSTATE_PG_DSN``, or fails it under
    ``CI=true``, where the server must be there.
    """
    reason = pg_support.unreachable_reason()
    if reason is not None:
        if pg_support.in_ci():
            pytest.fail(f"{reason}; CI needs it (start it or set TURNSTATE_PG_DSN)")
        pytest.skip(reason)
    pg_support.run_sync(pg_support.drop_dead_schemas())  # killed runs' (never a live one's)
    yield pg_support.SCHEMA
    pg_support.run_sync(pg_support.drop_test_schemas())
