"""Two ``turnstate serve`` processes on ONE SQLite file; one is SIGKILLed mid-answer.

Node A runs two turns whose clients leave after the first events (the turns run on,
detached): one whose provider answers late (an emulator ``stall``), one whose provider
hangs after a few events (``hang``). A client resumes the first on node B and gets the
whole answer, committed. Then A is killed with SIGKILL while the second turn hangs: a
client resuming it on B gets the events A had logged, then ``turn_aborted``
(``lease_expired``) once B's sweep reclaims A's lease; a new turn on that chat is served
by B within two lease periods of the kill. The file is intact afterwards (WAL recovered
by the surviving process), seqs gap-free, the killed turn aborted with both its
messages, nothing half-written.

A second test kills a process that holds the file's write lock in the middle of a
transaction: the serving node's turn, waiting for the lock, goes on at once, and the
dead process's uncommitted write is gone.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.server.support import SseEvent, parse_sse
from tests.server.test_process import ServeProcess, serving
from turnstate.engine._follow import REBUILT_FINAL_ID
from turnstate.storage import SqliteStore, TurnStatus

LEASE = 1.0
BOUND = 12.0  # every wait fails clearly after this many seconds
HEADERS = {"Authorization": "Bearer alice-token"}
TURN = {"provider": "openai", "model": "gpt-4o", "text": "hello"}


async def _json(session: aiohttp.ClientSession, method: str, url: str,
                **kwargs: Any) -> Any:
    async with session.request(method, url, headers=HEADERS, **kwargs) as response:
        assert response.status < 300, await response.text()
        return await response.json()


async def _fault(session: aiohttp.ClientSession, node: ServeProcess, **fault: Any) -> None:
    await _json(session, "POST", f"{node.url}api/emulator/faults",
                json={"provider": "openai", **fault})


async def _detached_turn(session: aiohttp.ClientSession, node: ServeProcess, chat_id: str,
                         until: str) -> str:
    """Start a turn, read its stream up to the first ``until`` event, leave; its id."""
    async with session.post(f"{node.url}api/chats/{chat_id}/turns", json=TURN,
                            headers=HEADERS) as response:
        assert response.status == 200, await response.text()
        while True:
            frame = (await response.content.readuntil(b"\n\n")).decode()
            if f"event: {until}\n" in frame:
                return response.headers["X-Turn-Id"]


async def _resumed(session: aiohttp.ClientSession, node: ServeProcess, chat_id: str,
                   turn_id: str) -> list[SseEvent]:
    async with session.get(f"{node.url}api/chats/{chat_id}/turns/{turn_id}/events",
                           headers=HEADERS) as response:
        assert response.status == 200, await response.text()
        events, _ = parse_sse(await response.text())
    return events


async def _served_after(session: aiohttp.ClientSession, node: ServeProcess, chat_id: str,
                        since: float) -> float:
    """Retry a turn on ``node`` until it is served; seconds since ``since``."""
    while True:
        async with session.post(f"{node.url}api/chats/{chat_id}/turns", json=TURN,
                                headers=HEADERS) as response:
            if response.status == 200:
                events, _ = parse_sse(await response.text())
                assert events[-1].event == "turn_completed", events[-1:]
                return time.monotonic() - since
            assert response.status == 409, await response.text()
        await asyncio.sleep(0.05)  # polling a time-based fact: the dead node's expiry


async def test_a_node_killed_mid_answer_on_one_sqlite_file(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text("alice: alice-token\n")
    options = ("--tokens", str(tmp_path / "tokens"), "--lease-seconds", str(LEASE))
    async with serving(tmp_path, *options) as node_a, serving(tmp_path, *options) as node_b, \
            aiohttp.ClientSession() as session:
        late, hung = [(await _json(session, "POST", f"{node_a.url}api/chats"))["id"]
                      for _ in range(2)]
        async with asyncio.timeout(BOUND):
            await _fault(session, node_a, kind="stall", seconds=0.5)
            late_turn = await _detached_turn(session, node_a, late, "state_changed")
            await _fault(session, node_a, kind="hang", after_events=6)
            hung_turn = await _detached_turn(session, node_a, hung, "text_delta")
            whole = await _resumed(session, node_b, late, late_turn)
        assert whole[-1].event == "turn_completed", whole[-1:]
        streamed = "".join(e.data["text"] for e in whole if e.event == "text_delta")
        async with asyncio.timeout(BOUND):
            partial = await _resumed_until(session, node_b, hung, hung_turn, "text_delta")
            node_a.proc.send_signal(signal.SIGKILL)
            killed_at = time.monotonic()
            await node_a.proc.wait()
            served = asyncio.ensure_future(_served_after(session, node_b, hung, killed_at))
            ended = await partial
            resumed_end = time.monotonic() - killed_at
            waited = await served
        print(f"\nSQLite: the resumed stream ended {resumed_end:.2f} s and a new turn was "
              f"served {waited:.2f} s after the SIGKILL (lease {LEASE:g} s)")
        assert waited <= 2 * LEASE, waited
    assert ended[-1].event == "turn_aborted", ended[-1:]
    assert ended[-1].data["reason"] == "lease_expired", ended[-1]
    assert any(e.event == "text_delta" for e in ended)  # what A had logged came first
    ids = [int(e.id) for e in ended if e.id is not None]
    # A's logged events in order, then the end rebuilt by B, with the id above any A gave
    assert ids == [*range(1, len(ids)), REBUILT_FINAL_ID], ids
    await _check_file(tmp_path / "serve.sqlite", late, streamed, hung)


async def _resumed_until(session: aiohttp.ClientSession, node: ServeProcess, chat_id: str,
                         turn_id: str, first: str) -> asyncio.Future[list[SseEvent]]:
    """Follow a turn on ``node``; return once a ``first`` event came, with a future of
    the whole stream's events."""
    response = await session.get(f"{node.url}api/chats/{chat_id}/turns/{turn_id}/events",
                                 headers=HEADERS)
    assert response.status == 200, await response.text()
    frames: list[bytes] = []
    while f"event: {first}\n".encode() not in b"".join(frames):
        frames.append(await response.content.readuntil(b"\n\n"))

    async def rest() -> list[SseEvent]:
        async with response:
            body = b"".join(frames) + await response.content.read()
        return parse_sse(body.decode())[0]

    return asyncio.ensure_future(rest())


async def _check_file(path: Path, late: str, streamed: str, hung: str) -> None:
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    async with SqliteStore.open(path) as store:
        for chat_id in (late, hung):
            chat = await store.load_chat(chat_id)
            assert chat.active_turn_id is None
            messages = await store.list_messages(chat_id)
            assert [m.seq for m in messages] == list(range(1, len(messages) + 1))
            by_seq = {m.seq: m for m in messages}
            for record in await store.list_turns(chat_id, limit=None):
                assert record.status is not TurnStatus.IN_PROGRESS, record
                expected = "completed" if record.status is TurnStatus.COMPLETED else "aborted"
                assert by_seq[record.user_seq].status.value == expected
                assert by_seq[record.assistant_seq].status.value == expected
        assert (await store.load_history(late))[-1].text() == streamed
        records = await store.list_turns(hung, limit=None)
        assert sorted((r.status.value, r.reason) for r in records) == [
            ("aborted", "lease_expired"), ("completed", None)], records


HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE chats SET version = version + 100 WHERE id = ?", (sys.argv[2],))
print("locked", flush=True)
sys.stdin.read()
"""


async def test_a_process_killed_holding_the_write_lock_frees_the_file(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text("alice: alice-token\n")
    async with serving(tmp_path, "--tokens", str(tmp_path / "tokens"),
                       "--lease-seconds", str(LEASE)) as node, \
            aiohttp.ClientSession() as session:
        chat_id = (await _json(session, "POST", f"{node.url}api/chats"))["id"]
        holder = await asyncio.create_subprocess_exec(
            sys.executable, "-c", HOLDER, str(tmp_path / "serve.sqlite"), chat_id,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        try:
            assert holder.stdout is not None
            async with asyncio.timeout(BOUND):
                assert await holder.stdout.readline() == b"locked\n"
                turn = asyncio.ensure_future(session.post(
                    f"{node.url}api/chats/{chat_id}/turns", json=TURN, headers=HEADERS))
                holder.send_signal(signal.SIGKILL)
                await holder.wait()
                async with await turn as response:
                    assert response.status == 200, await response.text()
                    events, _ = parse_sse(await response.text())
        finally:
            if holder.returncode is None:
                holder.kill()
                await holder.wait()
        assert events[-1].event == "turn_completed", events[-1:]
    async with SqliteStore.open(tmp_path / "serve.sqlite") as store:
        chat = await store.load_chat(chat_id)
        assert chat.version < 100 and chat.active_turn_id is None  # the dead write is gone
        assert [m.status.value for m in await store.list_messages(chat_id)] == [
            "completed", "completed"]


pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
