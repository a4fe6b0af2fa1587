"""A shutdown past its grace cuts the given-up turns' abort writes (helper "lifecycle4").

``serve`` on PostgreSQL through a loopback proxy, two turns stalled by the emulator, the
database black-holed, then the stop: ``serve`` returned within its grace (server3), but
the turns' shielded abort writes went on in the loop until the pool's acquire timeout
(9.2 s measured after ``serve`` returned, grace 3 s): in an embedder's loop they held it
and the pool's connections that long, and ``asyncio.run`` had to cancel them on its way
out. ``end_turns`` now cuts them with the runners.
"""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path

import aiohttp
import pytest

from tests import pg_support
from tests.server.test_shutdown_grace import _Out
from tests.tcp_proxy import proxied, proxied_dsn, upstream_of
from turnstate.engine import _writes
from turnstate.server import ServeOptions
from turnstate.server._serve import serve

SCHEMA = f"{pg_support.SCHEMA}_l4grace"
AUTH = {"Authorization": "Bearer alice-token"}
GRACE = 3.0

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


async def test_no_abort_write_outlives_a_shutdown_past_its_grace(
        pg_schema: str, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("alice: alice-token\n")
    os.chmod(tokens, 0o600)
    async with proxied(*upstream_of(pg_support.DSN)) as proxy:
        out, err, stop = _Out(), io.StringIO(), asyncio.Event()
        db = f"{proxied_dsn(pg_support.DSN, proxy)}?schema={SCHEMA}"
        served = asyncio.create_task(serve(
            ServeOptions(port=0, db=db, tokens=tokens, log_format="json",
                         shutdown_grace=GRACE), out=out, err=err, stop=stop))
        try:
            url = await asyncio.wait_for(out.url, 30)
            async with aiohttp.ClientSession(url, headers=AUTH) as http:
                streams, turn_ids = [], []
                for n in range(2):
                    chat = (await (await http.post("/api/chats")).json())["id"]
                    fault = {"provider": "openai", "kind": "stall", "seconds": 300}
                    assert (await http.post("/api/emulator/faults", json=fault)).status == 200
                    streams.append(await http.post(
                        f"/api/chats/{chat}/turns",
                        json={"provider": "openai", "model": "gpt-4o", "text": f"q{n}"}))
                    turn_ids.append(streams[-1].headers["X-Turn-Id"])
                    await streams[-1].content.readuntil(b"\n\n")  # it holds its lease
                proxy.black_hole()
                stop.set()
                async with asyncio.timeout(GRACE + 1.5):
                    assert await served == 0
                left = _writes.abort_writes(turn_ids)
                for stream in streams:
                    stream.close()
        finally:
            served.cancel()
            for write in _writes.abort_writes(turn_ids):  # the old code's: not left behind
                write.cancel()
            await proxy.flow()
    assert left == [], f"{len(left)} abort write(s) still going after serve returned"
    assert "Traceback" not in err.getvalue(), err.getvalue()
