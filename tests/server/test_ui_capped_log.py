"""The UI message stream of a turn whose log outgrew its cap still carries the whole
answer: past the cap only the final event is kept, and ``turn_completed`` carries the
text after the last tool result, so what the deltas did not bring is sent as one delta.
Before, such a stream (the transport's reconnect, or the starting stream itself once
the cap was hit) showed the answer cut off, or empty."""

from __future__ import annotations

import json
from typing import Any

from tests.server.support import Api
from turnstate.server._ui_stream import UiStream


def _texts(chunks: list[dict[str, Any]]) -> str:
    return "".join(c["delta"] for c in chunks if c["type"] == "text-delta")


def _run(events: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    ui = UiStream("m")
    return [chunk for kind, data in events for chunk in ui.chunks(kind, data)]


def test_the_text_the_deltas_missed_comes_from_the_final_event() -> None:
    chunks = _run([("text_delta", {"text": "Hel"}),
                   ("turn_completed", {"text": "Hello world", "turnId": "t"})])
    assert _texts(chunks) == "Hello world"
    kinds = [c["type"] for c in chunks]
    assert kinds.index("text-end") < kinds.index("finish")
    assert _texts(_run([("turn_completed", {"text": "All of it"})])) == "All of it"


def test_a_whole_stream_gets_nothing_more_and_text_before_tools_is_not_compared() -> None:
    whole = [("text_delta", {"text": "Hello"}), ("text_delta", {"text": " world"}),
             ("turn_completed", {"text": "Hello world"})]
    assert _texts(_run(whole)) == "Hello world"
    loop = [("text_delta", {"text": "Let me look."}),
            ("tool_call", {"callId": "c", "name": "w", "arguments": "{}"}),
            ("tool_result", {"callId": "c", "output": "{}"}),
            ("text_delta", {"text": "Sun"}), ("turn_completed", {"text": "Sunny."})]
    assert _texts(_run(loop)) == "Let me look.Sunny."
    other = [("text_delta", {"text": "abc"}), ("turn_completed", {"text": "xyz"})]
    assert _texts(_run(other)) == "abc"  # not a continuation: nothing sent twice


async def test_a_turn_past_the_log_cap_streams_its_whole_answer(api: Api) -> None:
    api.services.engine.detached.configure(cap_bytes=300)  # a few events, then the final
    chat = await api.new_chat()
    text = "tell me a rather long story please " * 3
    response = await api.call("POST", "/api/ui-messages", json={
        "id": chat, "messages": [{"role": "user", "parts": [{"type": "text", "text": text}]}],
        "provider": "openai", "model": "gpt-4o"})
    assert response.status == 200, await response.text()
    chunks = [json.loads(line[len("data: "):]) for line in (await response.text()).split("\n\n")
              if line.startswith("data: {")]
    (stored,) = [m for m in await api.json("GET", f"/api/ui-messages/{chat}")
                 if m["role"] == "assistant"]
    answer = "".join(p["text"] for p in stored["parts"] if p["type"] == "text")
    deltas = [c for c in chunks if c["type"] == "text-delta"]
    assert _texts(chunks) == answer and len(answer) > 100
    assert len(deltas) < 5  # the cap cut the deltas short: the last one is the rest
