"""The three embedders' programs of embed7 (docs/api.md alone), type-checked with
``mypy --strict`` by ``test_typed_program`` (one mypy run for every embedder program) and
run here: (a) tools and per-user models (``embed7_tools_program``), (b) a worker process
and a web tier on one SQLite file (``embed7_worker_program``), (c) a chat switched between
providers with tools in its history, edited and cut (``embed7_switch_program``)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tests.embedder.embed7_switch_program import switching
from tests.embedder.embed7_tools_program import production_engine, serve
from tests.embedder.embed7_worker_program import web_tier
from turnstate import AiohttpTransport, MemoryStore, Role, SqliteStore
from turnstate.emulators import EmulatedProviders
from turnstate.storage import decode_audit
from turnstate.testing import emulated_providers

__all__ = ["emulated_providers"]  # the fixture

HERE = Path(__file__).parent


async def test_tools_and_per_user_models(emulated_providers: EmulatedProviders) -> None:
    async with AiohttpTransport() as transport:
        outcomes = await serve(MemoryStore(), emulated_providers.adapters, transport)
    (end, results), *attached = outcomes
    assert end == "turn_completed"
    by_name = {r.name: r for r in results}
    assert not by_name["search"].is_error
    assert by_name["slow"].is_error and "timed out" in by_name["slow"].output
    assert by_name["broken"].is_error and "hunter2" not in by_name["broken"].output
    assert len(by_name["dump"].output) < 10_200 and "cut to its first" in by_name["dump"].output
    assert by_name["chart"].is_error and "binary data" in by_name["chart"].output
    assert [end for end, _ in attached] == ["turn_completed"] * 3 + ["400 content[1]"]


async def test_a_chat_switched_edited_and_cut(emulated_providers: EmulatedProviders) -> None:
    async with AiohttpTransport() as transport:
        outcomes, messages = await switching(MemoryStore(), emulated_providers.adapters,
                                             transport)
    assert all(outcome.startswith("completed") for outcome in outcomes), outcomes
    answers = [decode_audit(m.provider_state) for m in messages
               if m.role is Role.ASSISTANT and m.provider_state]
    assert [a.provider for a in answers] == ["openai", "anthropic", "deepseek",
                                             "openai-compatible", "anthropic"]
    assert answers[-1].metadata is not None and answers[-1].metadata["replayGaps"] == 1
    assert messages[0].parts[1:] and messages[2].text() == "edited question"


async def test_a_worker_process_and_a_web_tier(tmp_path: Path) -> None:
    path = str(tmp_path / "chats.sqlite")
    async with SqliteStore.open(path) as store:
        chat = await store.create_chat(owner="bob")
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.embedder.embed7_worker_program", path, chat.id, "turn-1",
        stdout=asyncio.subprocess.PIPE, cwd=HERE.parent.parent)
    assert worker.stdout is not None
    try:
        assert await asyncio.wait_for(worker.stdout.readline(), 60) == b"started\n"
        seen, finished = await asyncio.wait_for(web_tier(path, chat.id, "turn-1"), 60)
        said = await asyncio.wait_for(worker.stdout.read(), 60)
    finally:
        if worker.returncode is None:
            worker.kill()
        await worker.wait()
    ids = [event.id for event in seen]
    assert ids == list(range(1, len(ids) + 1)), ids  # resumed after the last id, no gap
    assert seen[-1].type == "turn_aborted"
    assert json.loads(seen[-1].data)["reason"] == "stopped"
    assert finished == "aborted stopped"
    assert said == b"ended turn_aborted\n"


async def test_the_production_adapters_as_a_literal() -> None:
    async with AiohttpTransport() as transport:
        engine = production_engine(MemoryStore(), transport)
        assert sorted(engine.adapters) == ["anthropic", "deepseek", "gemini", "openai",
                                           "openai-compatible"]
        await engine.aclose()
