"""``turnstate inspect`` and ``release`` print stored text that others wrote (a provider's
or a gateway's error message and code, a cursor, a turn's reason): its control
characters reach the operator's terminal escaped, never as sequences it acts on (a
provider's error ``\\x1b]0;...\\x07\\x1b[2J`` retitled the window and cleared the screen)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.cli.test_cli import run_cli
from tests.engine.support import collect, make_turn
from turnstate.commands._common import terminal_text
from turnstate.emulators import EmulatedProviders, Fault
from turnstate.engine import TurnEngine
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.storage import SqliteStore

HOSTILE = "bad \x1b]0;pwned\x07\x1b[2J\x9b31m \u202eend"


async def _aborted_chat(db: Path) -> str:
    async with EmulatedProviders(["openai"]) as providers, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport, \
            SqliteStore.open(db) as store:
        engine = TurnEngine(store, providers.adapters, transport)
        chat = await store.create_chat(owner="alice")
        providers.emulators["openai"].faults.push(Fault(status=400, body={"error": {
            "message": HOSTILE, "type": "invalid_request_error", "code": "x\x1b[1m"}}))
        outcome = await collect(engine.run_turn(chat.id, make_turn("hi")))
        assert outcome.final.type == "turn_aborted"
        return chat.id


def test_inspect_prints_a_providers_escape_sequences_escaped(tmp_path: Path) -> None:
    db = tmp_path / "d.sqlite"
    chat_id = asyncio.run(_aborted_chat(db))
    shown = run_cli("inspect", str(db), chat_id)
    assert shown.returncode == 0, shown.stderr
    assert "detail: openai HTTP 400" in shown.stdout
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    assert "\x9b" not in shown.stdout and "\u202e" not in shown.stdout
    assert r"bad \x1b]0;pwned\x07\x1b[2J\x9b31m \u202eend" in shown.stdout


def test_terminal_text_keeps_lines_and_letters_and_escapes_the_rest() -> None:
    assert terminal_text("line one\nline two: é, 中文, 🙂") == "line one\nline two: é, 中文, 🙂"
    assert terminal_text("a\tb\rc\x00d\x7fe\u2066f\ud800") == \
        r"a\tb\rc\x00d\x7fe\u2066f\ud800"
    terminal_text("\ud83d").encode("utf-8")  # printable on any UTF-8 terminal
