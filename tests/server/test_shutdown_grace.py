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
import contextlib
import io
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests import pg_support
from tests.tcp_proxy import proxied, proxied_dsn, upstream_of
from turnstate.emulators._base import Fault
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.server import ServeOptions
from turnstate.server._serve import serve
from turnstate.server._shutdown import ShutdownBudget, end_turns
from turnstate.storage import MemoryStore

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
                left = [t.get_name() for t in asyncio.all_tasks()
                        if t.get_name().startswith(("turn ", "turn log writer")) and not t.done()]
                assert left == [], left  # the runners given up ended with the server
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


async def test_a_turn_whose_log_lags_past_the_share_is_one_line_and_given_up(
        caplog: pytest.LogCaptureFixture) -> None:
    """The turn ended (its abort recorded) but its events never reached the turn log:
    one ``events_not_logged`` line naming the ids, and the log writer given up (not left
    retrying after the server returned)."""
    async with EmulatedProviders() as stack, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport:
        engine = TurnEngine(MemoryStore(), stack.adapters, transport)
        detached = engine.detached
        held = asyncio.Event()

        async def hanging(*args: Any, **kwargs: Any) -> Any:
            await held.wait()  # never set: a write the store never answers
        detached.log.append_many = hanging  # type: ignore[method-assign]
        chat = await engine.store.create_chat(owner="alice")
        stack.emulators["openai"].faults.push(Fault(delay=60))
        live = await detached.start(chat.id, TurnInput(
            provider="openai", model="gpt-4o", system_prompt="", user_text="hi",
            owner="alice"))
        with caplog.at_level(logging.ERROR, logger="turnstate"):
            async with asyncio.timeout(10):
                assert await end_turns(detached, 0.5) == 1
        assert live.done and live.task is not None and live.task.done()
        lines = [r for r in caplog.records if getattr(r, "outcome", None) == "unwritten"]
        assert [(r.reason, r.turn_id) for r in lines] == [  # type: ignore[attr-defined]
            ("events_not_logged", live.turn_id)]
        assert f"events 1-{live.last_id} were not written" in lines[0].getMessage()
        writer = detached._writer
        assert writer is not None
        with contextlib.suppress(asyncio.CancelledError):
            await writer
        assert writer.cancelled()
