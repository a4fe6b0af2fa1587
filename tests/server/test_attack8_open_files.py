"""``serve`` raises its open-files limit to the hard limit (attack8).

Every connection is a file descriptor, and no token is needed to open one and send
nothing for the 15 s of the read timeout. With the usual soft limit (1,024 on most
Linux systems, whatever the hard limit allows) a few hundred idle connections from one
client exhausted the process: ``accept()`` failed for everyone, and ``/healthz`` went
unanswered, for as long as the client kept reconnecting. ``serve`` now raises its soft
``RLIMIT_NOFILE`` to the hard limit at start (as Go's runtime does), so one client
needs that many connections instead (its ports run out first).
"""

from __future__ import annotations

import asyncio
import os
import re
import resource
import sys
from pathlib import Path

import aiohttp
import pytest

from tests.server.test_process import ROOT, STARTUP_SECONDS

SOFT = 128
IDLE = 200


def _low_soft_limit() -> None:  # runs in the child, before it executes Python
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT, hard))


@pytest.mark.skipif(resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 4 * IDLE,
                    reason="the hard limit leaves no room above the soft one")
async def test_idle_connections_past_the_soft_limit_leave_the_server_answering(
        tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "turnstate.cli", "serve", "--port", "0",
        "--db", str(tmp_path / "serve.sqlite"), cwd=tmp_path, env=env,
        preexec_fn=_low_soft_limit, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    idle: list[asyncio.StreamWriter] = []
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(STARTUP_SECONDS):
            while not (found := re.search(rb"open http://127\.0\.0\.1:(\d+)/",
                                          await proc.stdout.readline())):
                pass
        port = int(found.group(1))
        for _ in range(IDLE):  # more than the soft limit leaves room for
            idle.append((await asyncio.open_connection("127.0.0.1", port))[1])
        async with aiohttp.ClientSession() as session, asyncio.timeout(5), \
                session.get(f"http://127.0.0.1:{port}/healthz") as response:
            assert response.status == 200
    finally:
        for writer in idle:
            writer.close()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
