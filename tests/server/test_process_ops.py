"""``serve`` as an operator runs it: the log on stderr, a private database file."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp

from tests.server.test_process import serving


async def test_serve_logs_json_lines_with_ids_and_keeps_the_database_private(
        tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text("alice: alice-token\n")
    async with serving(tmp_path, "--tokens", str(tmp_path / "tokens"), "--log-level", "info",
                       "--log-format", "json") as process:
        assert oct((tmp_path / "serve.sqlite").stat().st_mode & 0o777) == "0o600"
        auth = {"Authorization": "Bearer alice-token"}
        async with aiohttp.ClientSession(process.url, headers=auth) as http:
            chat = await (await http.post("/api/chats")).json()
            fault = {"provider": "openai", "kind": "error"}
            assert (await http.post("/api/emulator/faults", json=fault)).status == 200
            for _ in range(2):
                async with http.post(f"/api/chats/{chat['id']}/turns", json={
                        "provider": "openai", "model": "gpt-4o", "text": "hi"}) as response:
                    await response.read()
            assert (await http.get("/healthz")).headers["Server"] == "turnstate"
        assert await process.stop() == 0
    entries = [json.loads(line) for line in process.lines if line.startswith("{")]
    turns = [e for e in entries if e.get("turn_id")]
    assert [(e["level"], e["outcome"], e.get("reason")) for e in turns] == \
        [("WARNING", "aborted", "provider_failed"), ("INFO", "completed", None)]
    assert all(e["chat_id"] == chat["id"] and e["owner"] == "alice" for e in turns)
    assert "alice-token" not in "\n".join(process.lines)
