"""A real ``python -m turnstate.cli serve`` process: start, serve, SIGTERM mid-turn."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import attrs
import pytest

from tests.server.support import parse_sse
from turnstate.storage import SqliteStore

ROOT = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 30


@attrs.define
class ServeProcess:
    proc: asyncio.subprocess.Process
    url: str
    lines: list[str]

    async def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(self.proc.communicate(), STARTUP_SECONDS)
        self.lines += out.decode().splitlines()
        return self.proc.returncode if self.proc.returncode is not None else -1


async def start_serve(tmp: Path, *extra: str) -> ServeProcess:
    """Start ``serve`` on a free loopback port; return once it printed its URL."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "turnstate.cli", "serve", "--port", "0",
        "--db", str(tmp / "serve.sqlite"), *extra, cwd=tmp, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    assert proc.stdout is not None
    lines: list[str] = []
    async with asyncio.timeout(STARTUP_SECONDS):
        while True:
            line = (await proc.stdout.readline()).decode()
            if not line:
                raise AssertionError("serve exited early:\n" + "".join(lines))
            lines.append(line.rstrip("\n"))
            found = re.search(r"open (http://127\.0\.0\.1:\d+/)(#token=\S+)?", line)
            if found:
                return ServeProcess(proc=proc, url=found.group(1), lines=lines)


@contextlib.asynccontextmanager
async def serving(tmp: Path, *extra: str) -> AsyncIterator[ServeProcess]:
    """``start_serve``, and the process killed on the way out if the test left it running."""
    process = await start_serve(tmp, *extra)
    try:
        yield process
    finally:
        if process.proc.returncode is None:
            process.proc.kill()
            await process.proc.wait()


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[ServeProcess]:
    (tmp_path / "tokens").write_text("alice: alice-token\nbob: bob-token\n")
    async with serving(tmp_path, "--tokens", str(tmp_path / "tokens")) as process:
        yield process


async def test_sigterm_mid_turn_exits_0_with_the_turn_aborted_and_the_lease_free(
        served: ServeProcess, tmp_path: Path) -> None:
    auth = {"Authorization": "Bearer alice-token"}
    async with aiohttp.ClientSession(served.url, headers=auth) as http:
        chat = await (await http.post("/api/chats")).json()
        async with http.post("/api/chats/" + chat["id"] + "/turns",
                             json={"provider": "openai", "model": "gpt-4o", "text": "one"}) as r:
            assert r.status == 200 and "turn_completed" in await r.text()
        fault = {"provider": "openai", "kind": "stall", "seconds": 300}
        assert (await http.post("/api/emulator/faults", json=fault)).status == 200
        stream = await http.post("/api/chats/" + chat["id"] + "/turns",
                                 json={"provider": "openai", "model": "gpt-4o", "text": "two"})
        assert stream.status == 200
        await stream.content.readuntil(b"\n\n")  # the turn holds its lease and waits
        assert await served.stop() == 0
        rest = await stream.content.read()  # a whole body: the stream was ended, not cut
        stream.close()
    events, _ = parse_sse(rest.decode())
    # The turn ends through its machine: its last state changes, then the final event
    # with what the engine knows (issue 21: no longer rebuilt from the stored record).
    assert [e.event for e in events] == ["state_changed", "state_changed", "turn_aborted"]
    assert [e.data["trigger"] for e in events[:2]] == ["cancelled", "abort_recorded"]
    final = events[-1].data
    assert final["stats"]["requests"] == 1
    assert any("1 in-flight turn(s) cancelled" in line for line in served.lines), served.lines
    async with SqliteStore.open(tmp_path / "serve.sqlite") as store:
        loaded = await store.load_chat(chat["id"])
        assert loaded.active_turn_id is None and loaded.last_provider_state is not None
        turns = await store.list_turns(chat["id"])
        assert [(t.status.value, t.reason) for t in turns] == [("aborted", "cancelled"),
                                                               ("completed", None)]
    assert (final["turnId"], final["chatId"], final["reason"]) == (turns[0].id, chat["id"],
                                                                   "cancelled")
    assert final["strategy"] == "cursor" and final["path"][-1]["dest"] == "aborted"


async def test_serve_creates_a_token_file_and_prints_the_url_with_it(tmp_path: Path) -> None:
    process = await start_serve(tmp_path)
    try:
        tokens = (tmp_path / "turnstate-tokens").read_text()
        (token,) = re.findall(r"^local: (\S+)$", tokens, re.MULTILINE)
        assert oct((tmp_path / "turnstate-tokens").stat().st_mode & 0o777) == "0o600"
        assert any(f"#token={token}" in line for line in process.lines)
        async with aiohttp.ClientSession(process.url) as http:
            page = await http.get("/")
            assert page.status == 200
            config = await (await http.get(
                "/api/config", headers={"Authorization": f"Bearer {token}"})).json()
            assert config["owner"] == "local"
            assert (await http.get("/healthz")).status == 200
            assert json.loads(await (await http.get("/api/chats")).text())["error"] == \
                "unauthorized"
        await _a_too_long_header_is_refused_in_json(process.url)
    finally:
        assert await process.stop() == 0


async def _a_too_long_header_is_refused_in_json(url: str) -> None:
    """``serve`` runs the app on ``TurnstateRunner``: aiohttp's parser's refusals are JSON."""
    host, port = url.removeprefix("http://").rstrip("/").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 9000 + b"\r\n\r\n")
    answer = await reader.read()
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"\r\nServer: turnstate\r\n" in head, head
    assert json.loads(body)["error"] == "header_too_large", body


async def test_otel_console_prints_a_span_tree_per_turn_without_the_texts(
        tmp_path: Path) -> None:
    """``serve --otel-console`` prints the turn's spans (flushed at exit), never its text."""
    (tmp_path / "tokens").write_text("alice: alice-token\n")
    async with serving(tmp_path, "--tokens", str(tmp_path / "tokens"),
                       "--otel-console") as process:
        auth = {"Authorization": "Bearer alice-token"}
        async with aiohttp.ClientSession(process.url, headers=auth) as http:
            chat = await (await http.post("/api/chats")).json()
            async with http.post("/api/chats/" + chat["id"] + "/turns", json={
                    "provider": "openai", "model": "gpt-4o", "text": "secret words"}) as r:
                assert "turn_completed" in await r.text()
        assert await process.stop() == 0
    output = "\n".join(process.lines)
    names = set(re.findall(r'"name": "([^"]+)"', output))
    assert {"turnstate.turn", "validate", "replay", "persist"} <= names, names
    assert '"gen_ai.request.model": "gpt-4o"' in output
    assert "secret words" not in output


async def test_a_token_from_a_named_tokens_file_is_never_printed(tmp_path: Path) -> None:
    """stdout may be captured by a log: only the local file ``serve`` keeps itself puts
    its token in the printed URL, never a file the operator named with ``--tokens``."""
    (tmp_path / "tokens").write_text("alice: alice-secret-token\n")
    async with serving(tmp_path, "--tokens", str(tmp_path / "tokens")) as process:
        assert await process.stop() == 0
    assert not any("alice-secret-token" in line for line in process.lines), process.lines
    assert any(line.startswith("open http://") for line in process.lines)


async def test_an_unusable_dsn_is_one_line_without_its_password(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "turnstate.cli", "inspect",
        "postgresql://u:pw-9f1c@127.0.0.1:notaport/db?password=pw-9f1c", "chat",
        cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), STARTUP_SECONDS)
    assert proc.returncode == 1
    assert b"pw-9f1c" not in out + err and b"Traceback" not in err
    assert err.decode().count("\n") == 1, err
    assert "not a usable PostgreSQL DSN" in err.decode()  # typed, not an internal error
