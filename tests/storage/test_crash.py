"""Crash safety: SIGKILL a process running turns at exact points, then check the file.

``crash_script.py`` (a fork server started with ``sys.executable``) runs a fixed
sequence of turns (commits, a clearing transition, an abandoned turn reclaimed by the
next begin, an abort) in a forked child that stops at one named checkpoint; this test
reads the child's report from the pipe (blocking on it: no sleeps) and kills it there
with SIGKILL. Each killed database must pass ``integrity_check``, hold exactly the state
of the operations whose transactions committed (``crash_script.expected_after``), and be
usable again: reclaim aborts a stale turn and a new turn commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.storage import crash_script
from tests.storage.crash_script import CHAT_ID, OPS, POINTS, Expected, expected_after
from tests.storage.support import ManualClock, commit, start
from turnstate.core._conversation import TransitionPart
from turnstate.storage import SqliteStore, TurnStatus

SCRIPT = Path(crash_script.__file__)
ROOT = Path(__file__).resolve().parents[2]


def _targets() -> list[tuple[int, str]]:
    # Every point of one begin (with a reclaim), one clearing transition, one commit and
    # one abort, every point between turns, and a few points of the other operations.
    chosen = {5, 6, 9, 11, 12} | {i for i, op in enumerate(OPS) if op.kind == "script"}
    targets = []
    for index in sorted(chosen):
        op = OPS[index]
        for point in POINTS[op.kind]:
            if (point == "reclaimed" and index != 11) or (point == "cleared" and not op.clear):
                continue
            targets.append((index, point))
    return [*targets, (2, "appended"), (3, "committed"), (15, "before_commit")]


TARGETS = _targets()


def test_enough_distinct_kill_points() -> None:
    """The crash test kills at no fewer than 20 distinct points, in every kind of step."""
    names = {crash_script.point_name(OPS[i], p) + f"@{i}" for i, p in TARGETS}
    assert len(names) == len(TARGETS) >= 20
    assert {OPS[i].kind for i, _ in TARGETS} == {"begin", "transition", "commit", "abort",
                                                 "script"}


class _ForkServer:
    """The crash script's fork server, driven line by line over its pipes."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc, self.stdin, self.stdout = proc, proc.stdin, proc.stdout

    async def ask(self, line: str) -> str:
        self.stdin.write(line.encode() + b"\n")
        await self.stdin.drain()
        # Block on the pipe until the child reports: that read is the synchronisation.
        answer = await asyncio.wait_for(self.stdout.readline(), timeout=30)
        if not answer:
            problem = await self.proc.stderr.read() if self.proc.stderr else b""
            pytest.fail(f"the crash script's server died: {problem.decode()}")
        return answer.decode().strip()

    async def kill_at(self, db: Path, index: int, point: str) -> None:
        """Run the script's turns on ``db`` and SIGKILL the child at the point."""
        name = crash_script.point_name(OPS[index], point)
        pid, _, said = (await self.ask(f"{db}\t{index}:{name}")).partition(" ")
        if said == name:
            os.kill(int(pid), signal.SIGKILL)
        reaped = (await self.ask(f"reap {pid}")).split()
        assert said == name, f"the script never reached {index}:{name}: {said}"
        status = int(reaped[2])
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


@contextlib.asynccontextmanager
async def _fork_server() -> AsyncIterator[_ForkServer]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(SCRIPT), cwd=ROOT, env=env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        yield _ForkServer(proc)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # the server exits, and any stopped child with it
        try:
            await asyncio.wait_for(proc.wait(), timeout=10)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


def _raw_check(db: Path, expected: Expected) -> None:
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        turns = conn.execute("SELECT id, status FROM turns ORDER BY rowid").fetchall()
        assert tuple((t, TurnStatus(s)) for t, s in turns) == expected.turns
        for turn_id, status in turns:
            rows = conn.execute("SELECT role, status, parts, provider_state FROM messages "
                                "WHERE id IN (?, ?) ORDER BY seq",
                                (f"{turn_id}:user", f"{turn_id}:assistant")).fetchall()
            assert [(role, s) for role, s, _, _ in rows] == [("user", status),
                                                             ("assistant", status)]
            audit, parts = rows[1][3], json.loads(rows[1][2])
            # Completed: the audit names the turn's own cursor. Otherwise: no audit at all.
            expected_audit = f"resp_{turn_id[1:]}" if status == "completed" else None
            assert (json.loads(audit)["cursor"] if audit else None) == expected_audit
            flags = [p["recovered"] for p in parts if p["type"] == "continuation_transition"]
            assert all(flag == (status == "completed") for flag in flags)
        state, active, version = conn.execute(
            "SELECT last_provider_state, active_turn_id, version FROM chats").fetchone()
        assert (json.loads(state)["cursor"] if state else None) == expected.cursor
        assert (active, version) == (expected.active, expected.version)
    finally:
        conn.close()


async def _recover(db: Path, expected: Expected) -> None:
    clock = ManualClock(crash_script.T0 + timedelta(days=1))
    async with SqliteStore.open(db, clock=clock) as store:
        assert await store.reclaim_expired() == (1 if expected.active else 0)
        statuses = await store.fetch_raw("SELECT DISTINCT status FROM messages")
        assert ("in_progress",) not in statuses
        if expected.active:
            turn = await store.load_turn(expected.active)
            assert (turn.status, turn.reason) == (TurnStatus.ABORTED, "lease_expired")
        chat = await store.load_chat(CHAT_ID)
        assert chat.version == expected.version and chat.active_turn_id is None
        lease = await store.begin_turn(CHAT_ID, start("after-crash"))
        chat = await store.commit_turn(lease, commit("resp_after"))
        assert chat.version == expected.version + 1
        history = await store.load_history(CHAT_ID)
        committed = [t for t, s in expected.turns if s is TurnStatus.COMPLETED]
        assert [m.id for m in history[:-2]] == [
            f"{t}:{role}" for t in committed for role in ("user", "assistant")]
        assert not any(isinstance(p, TransitionPart) and not p.recovered
                       for m in history for p in m.parts)


async def test_sigkill_at_every_point_leaves_a_consistent_file(tmp_path: Path) -> None:
    """After SIGKILL at each point the file is intact and holds only committed steps."""
    async with _fork_server() as server:
        for index, point in TARGETS:
            db = tmp_path / f"kill-{index}-{point}.db"
            await server.kill_at(db, index, point)
            expected = expected_after(index, point)
            _raw_check(db, expected)
            await _recover(db, expected)
