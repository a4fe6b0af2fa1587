"""A long chat through the engine with and without provider compaction: per turn, the
request bytes and the billed input tokens (``bench_replay.py`` part 3).

Anthropic, a small-context model (64,000 tokens, compaction flagged, trigger at 80%:
51,200 tokens) on the emulator over loopback, every turn a local loop. Billed input is
the turn's reported input tokens plus what the compaction step itself read
(``compactionUsage``, which the top-level usage leaves out). Without compaction the chat
overflows the window at some turn; the table says so.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from turnstate.core._context import ContextSettings
from turnstate.core._events import TurnCompleted
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore

MODEL = ModelInfo(provider="anthropic", name="demo-small-compacting", context_limit=64_000,
                  compaction=True)
REGISTRY = DEFAULT_REGISTRY.with_model(MODEL)
USER_CHARS = 1_600


@attrs.frozen
class TurnRow:
    """One turn: bytes sent, billed input tokens, whether it compacted; None if it failed."""

    request_bytes: int
    billed_input: int
    compacted: bool


def user_text(number: int) -> str:
    return f"turn {number}: " + "lorem ipsum dolor sit amet " * (USER_CHARS // 27)


async def long_chat(turns: int, *, compaction: bool) -> list[TurnRow | None]:
    """Run ``turns`` turns; a failed turn is None and ends the chat (it cannot go on)."""
    rows: list[TurnRow | None] = []
    async with EmulatedProviders(["anthropic"]) as providers, AiohttpTransport() as transport:
        emulator: Any = providers.emulators["anthropic"]
        emulator.context_windows[MODEL.name] = MODEL.context_limit
        store = MemoryStore()
        engine = TurnEngine(store, providers.adapters, transport, registry=REGISTRY)
        chat = await store.create_chat(owner="bench")
        settings = ContextSettings(provider_compaction_enabled=compaction)
        for number in range(turns):
            turn = TurnInput(provider="anthropic", model=MODEL.name, user_text=user_text(number),
                             system_prompt="You are terse.", context=settings)
            final = [event async for event in engine.run_turn(chat.id, turn)][-1]
            if not isinstance(final, TurnCompleted):
                rows.append(None)
                break
            rows.append(await _row(store, chat.id, final))
    return rows


async def _row(store: MemoryStore, chat_id: str, final: TurnCompleted) -> TurnRow:
    last = (await store.load_history(chat_id))[-1]
    metadata = json.loads(last.provider_state or "{}").get("metadata") or {}
    step = metadata.get("compactionUsage") or {}
    return TurnRow(request_bytes=final.stats.request_bytes,
                   billed_input=final.stats.usage.input_tokens + int(step.get("inputTokens", 0)),
                   compacted=bool(metadata.get("compacted")))


def _cell(row: TurnRow | None, failed: bool) -> str:
    if row is None:
        return f"{'overflow' if failed else '':>23}"
    mark = "*" if row.compacted else " "
    return f"{row.request_bytes:>12,} {row.billed_input:>9,}{mark}"


def print_table(on: list[TurnRow | None], off: list[TurnRow | None], every: int) -> None:
    """Every ``every``-th turn (and every compacting or failing turn), side by side."""
    print(f"{'turn':>6} {'bytes (on)':>12} {'billed in':>9}  {'bytes (off)':>12} {'billed in':>9}")
    for number in range(len(on)):
        here_off = off[number] if number < len(off) else None
        failed = number < len(off) and off[number] is None
        compacted = on[number] is not None and on[number].compacted  # type: ignore[union-attr]
        if number % every and not compacted and not failed and number != len(on) - 1:
            continue
        print(f"{number + 1:>6} {_cell(on[number], False)} {_cell(here_off, failed)}")
    print("(* this turn compacted; billed input = reported input + the compaction step's input)")
