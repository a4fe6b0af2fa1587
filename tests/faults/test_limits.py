"""Streams that never end are cut by a declared limit that the abort names (issue 12,
item 3): keepalive comments forever, one line that never ends, endless events past the
byte limit or the stream-time limit. Small limits, so no test waits long."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.engine.support import FakeClock, collect, make_turn
from tests.faults.hostile import endless_events, endless_line, hostile_server, keepalives
from tests.faults.rig import quick_transport
from turnstate.emulators._emulated import kind_of
from turnstate.engine import TurnEngine
from turnstate.providers import StreamLimits
from turnstate.storage import MemoryStore

PROVIDERS = ("openai", "gemini", "openai-compatible", "deepseek", "anthropic")
MODELS = {"openai": "gpt-4o", "gemini": "gemini-2.5-flash", "openai-compatible": "gpt-4o-mini",
          "deepseek": "deepseek-chat", "anthropic": "claude-sonnet-4-5"}
CASES: dict[str, tuple[Callable[[Any], Any], StreamLimits]] = {
    "max_event_gap_seconds": (keepalives, StreamLimits(max_event_gap_seconds=0.2)),
    "max_line_bytes": (endless_line, StreamLimits(max_line_bytes=64 << 10)),
    "max_stream_bytes": (endless_events, StreamLimits(max_stream_bytes=256 << 10)),
    "max_stream_seconds": (endless_events, StreamLimits(max_stream_seconds=0.2,
                                                        max_stream_bytes=1 << 40)),
}


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("limit", sorted(CASES))
async def test_an_endless_stream_is_cut_by_the_named_limit(provider: str, limit: str) -> None:
    behaviour, limits = CASES[limit]
    store = MemoryStore(clock=FakeClock())
    chat = await store.create_chat(owner="limits")
    async with hostile_server(behaviour) as base_url, \
            quick_transport(limits=limits, idle_timeout=5.0) as transport:
        adapter = kind_of(provider).adapter(base_url=base_url, api_key="hostile-test-key")
        engine = TurnEngine(store, {provider: adapter}, transport, clock=FakeClock())
        outcome = await collect(engine.run_turn(chat.id, make_turn(
            "hi", provider=provider, model=MODELS[provider])))
    final = outcome.final
    assert final.type == "turn_aborted" and final.reason == "provider_failed"
    assert limit in (final.detail or ""), final.detail
    assert (await store.load_chat(chat.id)).active_turn_id is None
    assert "in_progress" not in [m.status.value for m in await store.list_messages(chat.id)]
