"""``inspect`` words a turn's cost as its audit knows it (money, 2026-12-04): a request
cut before any usage made the cost unknown, which inspect called "n/a (no price)" for a
priced model, or left out with the turn's usage; a cut with known figures is a floor."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.cli.test_cli import run_cli
from tests.engine.support import collect, make_turn
from turnstate.core._cost import audit_cost_text
from turnstate.emulators import EmulatedProviders, Fault
from turnstate.engine import TurnEngine
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import SqliteStore


async def _chat(db: Path) -> str:
    async with EmulatedProviders(["openai", "anthropic"]) as providers, \
            AiohttpTransport() as transport, SqliteStore.open(db) as store:
        engine = TurnEngine(store, providers.adapters, transport)
        chat = await store.create_chat(owner="alice")
        providers.emulators["openai"].faults.push(Fault(cut_after=8))
        await collect(engine.run_turn(chat.id, make_turn("tell me more " * 20)))
        providers.emulators["anthropic"].faults.push(Fault(cut_after=6))
        await collect(engine.run_turn(chat.id, make_turn(
            "and more " * 20, provider="anthropic", model="claude-sonnet-4-6")))
        return chat.id


def test_inspect_says_a_cut_turns_cost_is_unknown_or_a_floor(tmp_path: Path) -> None:
    db = tmp_path / "d.sqlite"
    chat_id = asyncio.run(_chat(db))
    shown = run_cli("inspect", str(db), chat_id)
    assert shown.returncode == 0, shown.stderr
    assert "usage: not reported; cost unknown" in shown.stdout
    assert "or more (1 request(s) cut mid-answer" in shown.stdout
    assert "n/a (no price)" not in shown.stdout


def test_the_cost_text_of_each_audit() -> None:
    def audit(metadata: str) -> str:
        return '{"provider":"p","metadata":' + metadata + "}"

    priced = '{"costUsd":{"total":"0.01","input":"0.01","cachedInput":"0","cacheWrite":"0",' \
             '"output":"0"}'
    assert audit_cost_text(audit(priced + "}")) == "$0.01"
    assert audit_cost_text(audit(priced + ',"cutRequests":2}')).startswith("$0.01 or more (2")
    assert audit_cost_text(audit('{"usageMissing":true}')).startswith("unknown")
    assert audit_cost_text(audit("{}")) == "n/a (no price)"
    assert audit_cost_text(None) == "n/a (no price)"
    assert audit_cost_text("not json") == "n/a (no price)"
