"""The Anthropic emulator's refusal streams as the recorded one does (wire9): before, it
sent the refusal's words as a ``text`` block, which the real API does not (the
recorded ``anthropic-refusal.chunks.txt``: ``message_start``, ``ping``,
``message_delta`` with ``stop_reason: refusal`` and ``stop_details``, ``message_stop``;
no content block), so the engine's path for a content-less refusal went untested."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp

from turnstate.emulators import AnthropicEmulator, EmulatorServer

HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}


def _frames(lines: list[str]) -> list[dict[str, object]]:
    return [json.loads(line) for line in lines if line.strip()]


def _shape(frames: list[dict[str, object]]) -> list[object]:
    """Each frame's type, and for ``message_delta`` the keys of its ``delta`` and of its
    ``stop_details``."""
    out: list[object] = []
    for frame in frames:
        delta = frame.get("delta")
        if frame["type"] == "message_delta" and isinstance(delta, dict):
            out.append(("message_delta", sorted(delta), sorted(delta["stop_details"])))
        else:
            out.append(frame["type"])
    return out


async def test_a_refusal_streams_as_recorded(recorded_dir: Path) -> None:
    recorded = _frames((recorded_dir / "anthropic" / "anthropic-refusal.chunks.txt")
                       .read_text().splitlines())
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "stream": True,
            "messages": [{"role": "user", "content": "[[refuse]] something bad"}]}
    async with EmulatorServer(AnthropicEmulator()) as server, \
            aiohttp.ClientSession() as session, \
            session.post(server.base_url + "/v1/messages", json=body,
                         headers=HEADERS) as response:
        text = await response.text()
    emulated = _frames([line[5:] for line in text.splitlines() if line.startswith("data:")])
    assert _shape(emulated) == _shape(recorded)
    details = emulated[2]["delta"]["stop_details"]  # type: ignore[index]
    assert details["type"] == "refusal" and details["explanation"]
