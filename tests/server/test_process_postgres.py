"""``turnstate serve --db postgresql://...?schema=...``: a real serve process on PostgreSQL.

One turn commits through the API, a second is stalled by the emulator and cut by
SIGTERM; the process exits 0, and the rows it left in its own schema say what the API
said: the first turn completed with its cursor kept, the second aborted ``cancelled``,
no lease left. Skips without a reachable server and fails under ``CI=true`` (the
``pg_schema`` fixture's rule); the schema is dropped with the run's others.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest

from tests import pg_support
from tests.server.support import parse_sse
from tests.server.test_process import ServeProcess, serving
from turnstate.storage import PostgresStore

SCHEMA = f"{pg_support.SCHEMA}_serve"
AUTH = {"Authorization": "Bearer alice-token"}
PASSWORD = "never-printed-3f9a"  # trust auth ignores it; the startup line must not show it


def with_password(dsn: str) -> str:
    """The DSN with a password in it (kept if it already has one)."""
    parts = urlsplit(dsn)
    if parts.password:
        return dsn
    user = parts.username or "postgres"
    return parts._replace(netloc=f"{user}:{PASSWORD}@{parts.hostname}:{parts.port or 5432}"
                          ).geturl()
TURN = {"provider": "openai", "model": "gpt-4o"}


@pytest.fixture
async def served_pg(pg_schema: str, tmp_path: Path) -> AsyncIterator[ServeProcess]:
    (tmp_path / "tokens").write_text("alice: alice-token\n")
    # ``--db`` given again: argparse keeps the last one, so the DSN replaces the SQLite
    # file start_serve names (the test checks that file never appears).
    async with serving(tmp_path, "--tokens", str(tmp_path / "tokens"),
                       "--db", f"{with_password(pg_support.DSN)}?schema={SCHEMA}") as process:
        yield process


async def test_serve_on_postgres_commits_a_turn_and_aborts_the_cut_one(
        served_pg: ServeProcess, tmp_path: Path) -> None:
    assert any(f"schema={SCHEMA}" in line for line in served_pg.lines), served_pg.lines
    assert not any(PASSWORD in line for line in served_pg.lines), served_pg.lines
    async with aiohttp.ClientSession(served_pg.url, headers=AUTH) as http:
        chat_id = (await (await http.post("/api/chats")).json())["id"]
        async with http.post(f"/api/chats/{chat_id}/turns", json={**TURN, "text": "one"}) as r:
            assert r.status == 200
            events, _ = parse_sse(await r.text())
        assert [e.event for e in events][-1] == "turn_completed"
        view = await (await http.get(f"/api/chats/{chat_id}")).json()
        assert [m["seq"] for m in view["messages"]] == [1, 2]
        fault = {"provider": "openai", "kind": "stall", "seconds": 300}
        assert (await http.post("/api/emulator/faults", json=fault)).status == 200
        stream = await http.post(f"/api/chats/{chat_id}/turns", json={**TURN, "text": "two"})
        assert stream.status == 200
        await stream.content.readuntil(b"\n\n")  # the turn holds its lease and waits
        assert await served_pg.stop() == 0
        rest = await stream.content.read()
        stream.close()
    assert [e.event for e in parse_sse(rest.decode())[0]] == ["state_changed", "state_changed",
                                                              "turn_aborted"]
    assert any("1 in-flight turn(s) cancelled" in line for line in served_pg.lines)
    assert not (tmp_path / "serve.sqlite").exists()  # everything went to PostgreSQL
    async with PostgresStore.open(pg_support.DSN, schema=SCHEMA) as store:
        chat = await store.load_chat(chat_id, owner="alice")
        assert chat.active_turn_id is None and chat.version == 1
        assert chat.last_provider_state is not None  # the cut turn left the cursor alone
        turns = await store.list_turns(chat_id)
        assert [(t.status.value, t.reason) for t in turns] == [("aborted", "cancelled"),
                                                               ("completed", None)]
        history = await store.load_history(chat_id)
        assert [(m.seq, m.role.value) for m in history] == [(1, "user"), (2, "assistant")]
        statuses = [m.status.value for m in await store.list_messages(chat_id)]
        assert statuses == ["completed", "completed", "aborted", "aborted"]
