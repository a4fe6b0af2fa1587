"""``turnstate.testing.StoreConformance`` run on the three stores of the package and on a
custom store written against the public protocol; a planted ``committed_seq`` bug in the
custom store fails it (run in a separate pytest process, as an embedder would)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import pg_support
from tests.testing.custom_store_titles import titled_dict_store
from turnstate import MemoryStore, SqliteStore
from turnstate.storage import PostgresStore
from turnstate.testing import ManualClock, StoreConformance

ROOT = Path(__file__).resolve().parents[2]


class TestMemoryStore(StoreConformance):
    def make_store(self, clock: ManualClock) -> contextlib.AbstractAsyncContextManager[Any]:
        return contextlib.nullcontext(MemoryStore(clock=clock))


class TestSqliteStore(StoreConformance):
    def make_store(self, clock: ManualClock) -> contextlib.AbstractAsyncContextManager[Any]:
        return SqliteStore.open(":memory:", clock=clock)


class TestSqliteFileStore(StoreConformance):
    @pytest.fixture(autouse=True)
    def _file(self, tmp_path: Path) -> Iterator[None]:
        self.path = tmp_path / "chats.db"
        yield

    def make_store(self, clock: ManualClock) -> contextlib.AbstractAsyncContextManager[Any]:
        return SqliteStore.open(self.path, clock=clock)


class TestPostgresStore(StoreConformance):
    @pytest.fixture(autouse=True)
    def _schema(self, pg_schema: str) -> Iterator[None]:
        yield

    @contextlib.asynccontextmanager
    async def make_store(self, clock: ManualClock) -> AsyncIterator[Any]:
        async with PostgresStore.open(pg_support.DSN, schema=pg_support.SCHEMA, clock=clock,
                                      pool_max=4) as store:
            await store.fetch_raw("TRUNCATE chats, messages, turns CASCADE")
            yield store


class TestCustomStore(StoreConformance):
    def make_store(self, clock: ManualClock) -> contextlib.AbstractAsyncContextManager[Any]:
        return titled_dict_store(clock)


EMBEDDER_TEST = '''
from tests.testing.custom_store import dict_store
from tests.testing.custom_store_titles import titled_dict_store
from turnstate.testing import StoreConformance


class TestEmbeddersStore(StoreConformance):
    def make_store(self, clock):
        return {factory}(clock, forget_commits={forget})
'''


def run_suite(tmp_path: Path, *, forget: bool,
              factory: str = "titled_dict_store") -> subprocess.CompletedProcess[str]:
    test = tmp_path / "test_embedder.py"
    test.write_text(EMBEDDER_TEST.format(forget=forget, factory=factory))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "asyncio",
         "-o", "asyncio_mode=strict", "--rootdir", str(tmp_path), str(test)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_the_suite_passes_a_correct_custom_store_in_an_embedders_project(
    tmp_path: Path,
) -> None:
    result = run_suite(tmp_path, forget=False)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = sum(name.startswith("test_") for name in dir(StoreConformance))
    assert f"{checks} passed" in result.stdout


def test_a_planted_committed_seq_bug_fails_the_suite(tmp_path: Path) -> None:
    result = run_suite(tmp_path, forget=True)
    assert result.returncode == 1, result.stdout
    assert "committed_seq/history_chars are" in result.stdout
    assert "test_a_commit_keeps_committed_seq_and_history_chars FAILED" in result.stdout \
        or "FAILED test_embedder.py::TestEmbeddersStore::" \
           "test_a_commit_keeps_committed_seq_and_history_chars" in result.stdout


def test_a_store_without_titles_bound_or_search_fails_the_suite(tmp_path: Path) -> None:
    """``rename_chat``, ``chat_titles``, ``create_chat(max_chats=)`` and ``search_chats``
    are checked: a store written before them (``DictStore``) fails those checks only."""
    result = run_suite(tmp_path, forget=False, factory="dict_store")
    assert result.returncode == 1, result.stdout
    failed = {line.rsplit("::", 1)[-1].split(" ")[0] for line in result.stdout.splitlines()
              if line.startswith("FAILED ")}
    assert failed == {
        "test_a_rename_sets_and_removes_a_title_without_touching_the_chat",
        "test_titles_are_the_owner_s", "test_max_chats_bounds_each_owner_s_chats",
        "test_search_finds_titles_and_first_questions_a_page_at_a_time",
        "test_search_folds_case_and_accents_the_same_way_in_every_store"}, result.stdout
