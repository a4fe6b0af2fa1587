"""``serve --shutdown-grace``: the whole shutdown is bounded while the database is away.

``serve`` on PostgreSQL through a loopback proxy (``tests/tcp_proxy.py``); two turns run
(the emulator stalls them), the proxy black-holes every byte (a silent database), and
SIGTERM's event is set. Before, the shutdown waited for each turn's abort write while its
lease lasted (30 s), then for its event-log writes (35 s a statement, retried 10 s):
57 s measured with one turn, past Kubernetes' 30 s grace. Now it returns within the
grace, with one ``outcome=unwritten`` line per turn whose end was not recorded, and no
traceback.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import time
from pathlib import Path

import aiohttp
import pytest

from tests import pg_support
from tests.tcp_proxy import proxied, proxied_dsn, upstream_of
from turnstate.server import ServeOptions
from turnstate.server._serve import serve
from turnstate.server._shutdown import ShutdownBudget

SCHEMA = f"{pg_support.SCHEMA}_grace"
AUTH = {"Authorization": "Bearer alice-token"}
TURN = {"provider": "openai", "model": "gpt-4o"}
GRACE = 3.0
SLACK = 1.5  # the loop's own steps, on a loaded machine


class _Out(io.StringIO):
    """serve's stdout: resolves ``url`` once it printed the page's address."""

    def __init__(self) -> None:
        super().__init__()
        self.url: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def write(self, text: str) -> int:
        found = re.search(r"open (http://\S+/)", text)
        if found and not self.url.done():
            self.url.set_result(found.group(1))
        return super().write(text)


def test_the_budget_spends_the_grace_in_three_shares() -> None:
    budget = ShutdownBudget(25.0)
    assert (budget.turns, budget.connections, budget.close) == (17.5, 3.75, 3.75)
    assert ShutdownBudget(300.0).close == 5.0 and ShutdownBudget(300.0).connections == 10.0


async def test_a_shutdown_with_the_database_silent_ends_within_its_grace(
        pg_schema: str, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("alice: alice-token\n")
    os.chmod(tokens, 0o600)
    async with proxied(*upstream_of(pg_support.DSN)) as proxy:
        out, err, stop = _Out(), io.StringIO(), asyncio.Event()
        options = ServeOptions(port=0, db=f"{proxied_dsn(pg_support.DSN, proxy)}?schema={SCHEMA}",
                               tokens=tokens, log_format="json", shutdown_grace=GRACE)
        served = asyncio.create_task(serve(options, out=out, err=err, stop=stop))
        try:
            url = await asyncio.wait_for(out.url, 30)
            async with aiohttp.ClientSession(url, headers=AUTH) as http:
                streams, chats = [], []
                for n in range(2):
                    chats.append((await (await http.post("/api/chats")).json())["id"])
                    fault = {"provider": "openai", "kind": "stall", "seconds": 300}
                    assert (await http.post("/api/emulator/faults", json=fault)).status == 200
                    streams.append(await http.post(f"/api/chats/{chats[-1]}/turns",
                                                   json={**TURN, "text": f"q{n}"}))
                    await streams[-1].content.readuntil(b"\n\n")  # it holds its lease
                proxy.black_hole()
                started = time.monotonic()
                stop.set()
                async with asyncio.timeout(GRACE + SLACK):
                    assert await served == 0
                took = time.monotonic() - started
                for stream in streams:
                    stream.close()
        finally:
            served.cancel()
            await proxy.flow()
    print(f"\nshutdown with the database silent: {took:.2f} s (grace {GRACE:g} s)")
    lines = [json.loads(line) for line in err.getvalue().splitlines()]
    unwritten = [line for line in lines if line.get("outcome") == "unwritten"]
    assert sorted(line["chat_id"] for line in unwritten) == sorted(chats), lines
    assert {line["reason"] for line in unwritten} == {"abort_not_recorded"}
    assert all(line["level"] == "ERROR" and "[shutdown]" in line["message"]
               for line in unwritten)
    assert "Traceback" not in err.getvalue(), err.getvalue()
    assert "2 in-flight turn(s) cancelled" in out.getvalue()


pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
