"""Stop in a ``useChat`` front end (the Vercel AI SDK). A turn runs on its own at the
server (a reload resumes it), so the SDK's ``stop()``, which only aborts its request,
left the turn running: the answer went on (and on a real provider, its cost), the stored
answer was not what the user saw stop, and the next question got ``409 chat_busy``.
docs/server.md's React example wired exactly that ``stop``; it now asks the server,
``POST /api/chats/{id}/turns/{turnId}/stop`` with the streaming message's id (the turn
id), and ``tests/server/aisdk/chat_stop.mjs`` does what it does through the SDK's own
``AbstractChat``: the stream ends with ``abort``, and the next question is answered.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from tests.server.support import Api
from tests.server.test_ai_sdk import HERE, pytestmark  # noqa: F401

DOCS = Path(__file__).resolve().parents[2] / "docs" / "server.md"


def test_the_documented_react_example_stops_the_turn_at_the_server() -> None:
    example = DOCS.read_text(encoding="utf-8").split("```tsx", 1)[1].split("```", 1)[0]
    assert "onClick={stop}" not in example  # the SDK's stop() alone leaves the turn running
    assert re.search(r"/api/chats/\$\{chatId\}/turns/\$\{[^}]+\}/stop", example)
    assert 'method: "POST"' in example


async def test_a_stop_through_the_stop_route_ends_the_sdks_stream_and_frees_the_chat(
        api: Api) -> None:
    chat = await api.new_chat()
    hang = {"provider": "openai", "kind": "hang", "after_events": 9}
    await api.json("POST", "/api/emulator/faults", json=hang)
    server = api.client.server
    proc = await asyncio.create_subprocess_exec(
        "node", str(HERE / "chat_stop.mjs"), f"http://{server.host}:{server.port}",
        "alice-token", chat, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    seen = json.loads(out)
    stopped, following = seen["stopped"], seen["next"]
    assert (stopped["status"], stopped["error"]) == ("ready", None)
    said = "".join(p["text"] for p in stopped["message"]["parts"] if p["type"] == "text")
    turn = next(p["data"] for p in stopped["message"]["parts"] if p["type"] == "data-turn")
    assert (turn["outcome"], turn["reason"]) == ("aborted", "stopped")
    history = await api.json("GET", f"/api/ui-messages/{chat}")
    kept = "".join(p["text"] for p in history[1]["parts"] if p["type"] == "text")
    assert said and kept == said  # the stored answer is what the user saw stop
    assert (following["status"], following["error"]) == ("ready", None)
    assert [p["text"] for p in following["message"]["parts"] if p["type"] == "text"] == [
        "You said: And the next one"]
