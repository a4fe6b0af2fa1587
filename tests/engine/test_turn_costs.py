"""A turn's fixed costs (issue 26): what a cursor turn no longer does, each checked so
that the old code fails."""

from __future__ import annotations

import os
import queue
import sys
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

import attrs
import pytest

from tests.engine.support import Env, make_turn
from tests.helpers import record_calls
from turnstate.core import _envelope, _events, _generation
from turnstate.core import _hashing as hashing
from turnstate.core._conversation import TextPart
from turnstate.core._decisions import TurnContext
from turnstate.core._envelope import Mode
from turnstate.core._events import (
    StateChanged,
    TextDeltaEvent,
    state_changed,
    text_delta_event,
)
from turnstate.core._generation import NO_SETTINGS, GenerationSettings, check_settings
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.engine import _limits, _run, _turn_input
from turnstate.engine._turn_input import new_turn_id
from turnstate.providers._envelopes import standard_envelope
from turnstate.providers._protocol import ProviderResponse
from turnstate.states import PathStep, _machine
from turnstate.states._machine import edge_step
from turnstate.storage import MemoryStore, _memory_turns, _records, _rows
from turnstate.storage._protocol import TurnCommit, TurnStart

NOW = datetime(2026, 12, 3, 15, 0, tzinfo=UTC)


def test_a_turn_id_is_a_random_version_4_uuid_in_hex() -> None:
    ids = {new_turn_id() for _ in range(2000)}
    assert len(ids) == 2000
    for text in ids:
        parsed = uuid.UUID(hex=text)
        assert parsed.hex == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_turns_without_settings_share_one_frozen_default() -> None:
    """No ``GenerationSettings`` or ``ContextSettings`` is built per ``TurnInput``."""
    first, second = make_turn("a"), make_turn("b")
    assert first.settings is second.settings is NO_SETTINGS
    assert first.context is second.context
    assert GenerationSettings() == NO_SETTINGS and NO_SETTINGS.given() == ()


def test_no_settings_are_checked_without_reading_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings equal to the defaults set nothing, so nothing can be refused."""
    def unread(_: object) -> bool:
        raise AssertionError("a setting was read")

    monkeypatch.setattr(_generation, "_set", unread)
    capability = DEFAULT_REGISTRY.provider("anthropic")
    model = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")
    check_settings(GenerationSettings(), capability, model, [], thinking_by_default=True)
    with pytest.raises(AssertionError, match="a setting was read"):
        check_settings(GenerationSettings(seed=1), capability, model, [])


async def test_a_turn_with_a_reported_input_count_estimates_nothing(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """The provider's input count wins over the estimate, so the estimate (the prompt,
    the parts, the tool schemas encoded) is not computed."""
    await env.turn("first")

    def no_estimate(*_: object, **__: object) -> int:
        raise AssertionError("the context was estimated")

    monkeypatch.setattr(_run, "estimate_tokens", no_estimate)
    outcome = await env.turn("second")
    assert outcome.committed, outcome.final
    (snapshot,) = outcome.of_type("context_snapshot")
    assert snapshot.snapshot.source == "provider"
    assert snapshot.snapshot.estimated_input_tokens > 0


async def test_a_cursor_turn_decodes_no_envelope(env: Env,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The envelope a cursor turn continues from is the one its chat's previous turn
    committed on this engine: read back without decoding the chat row's text."""
    await env.turn("first")

    def undecodable(_: object) -> object:
        raise AssertionError("the envelope was decoded")

    monkeypatch.setattr(_envelope, "loads_strict", undecodable)
    outcome = await env.turn("second")
    assert outcome.final.strategy == "cursor" and outcome.committed


async def test_a_turn_with_tools_hashes_its_toolset_once(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """``check_input`` takes the digest as it checks the tools encode; the turn's
    context reuses it (the tools were encoded and hashed twice per turn)."""
    await env.turn("first")
    calls: list[int] = []

    def counted(tools: Any) -> str:
        calls.append(len(tools))
        return hashing.toolset_hash(tools)

    monkeypatch.setattr(_limits, "toolset_hash", counted)
    monkeypatch.setattr(_turn_input, "toolset_hash", counted)
    outcome = await env.turn("second")
    assert outcome.final.strategy == "cursor" and outcome.committed
    assert calls == [2]  # make_turn's two tools, once


def test_a_calls_envelope_is_built_by_one_constructor_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``standard_envelope`` names the cursor (durable) or the loop's messages (stateless
    loop) in the constructor call, not by an ``attrs.evolve`` of a first envelope."""
    def no_evolve(*_: object, **__: object) -> object:
        raise AssertionError("attrs.evolve")

    monkeypatch.setattr(attrs, "evolve", no_evolve)
    ctx = TurnContext(provider="openai", model_name="gpt-4o", system_prompt_hash="p",
                      toolset_hash="t", committed_seq=3, now=NOW)
    response = ProviderResponse(response_id="resp_9", parts=(), metadata={"compacted": True})
    loop = ({"role": "user", "content": "hi"},)
    durable = standard_envelope(ctx, Mode.RESPONSES, response, loop_messages=loop, now=NOW,
                                covers_seq=4)
    assert (durable.cursor, durable.loop_messages, durable.covers_seq) == ("resp_9", None, 4)
    assert durable.metadata == {"compacted": True} and durable.created_at == NOW
    stateless = standard_envelope(ctx, Mode.STATELESS_LOOP, response, loop_messages=loop,
                                  now=NOW, covers_seq=4)
    assert (stateless.cursor, stateless.loop_messages) == (None, loop)


def test_turn_ids_read_the_system_random_source_once_per_64(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One ``os.urandom`` call serves 64 turn ids (it was one call, a system call, per
    id); the ids stay distinct version-4 UUIDs."""
    reads: list[int] = []
    urandom = _turn_input.os.urandom

    def counted(size: int) -> bytes:
        reads.append(size)
        return urandom(size)

    monkeypatch.setattr(_turn_input.os, "urandom", counted)
    _turn_input._random.drop()
    ids = {new_turn_id() for _ in range(128)}
    assert len(ids) == 128 and reads == [16 * 64, 16 * 64]
    assert all(uuid.UUID(hex=text).version == 4 for text in ids)


def test_a_forked_child_draws_no_turn_id_its_parent_draws() -> None:
    """The buffered random bytes are dropped in a forked child (``os.register_at_fork``):
    parent and child would otherwise hand out the same next id."""
    new_turn_id()  # the buffer holds the next 63 ids
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.write(write, new_turn_id().encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 64).decode()
    os.close(read)
    assert len(child) == 32 and child != new_turn_id()


def test_a_thread_paused_anywhere_in_drawing_a_turn_id_draws_no_id_another_draws() -> None:
    """The buffered random bytes are shared by every thread: a thread switch inside the
    draw (at any line, as a line tracer such as coverage or a debugger allows on 3.11)
    must not let two threads take the same 16 bytes. The thread is paused at each line
    of the draw in turn while this one draws an id."""
    here = _turn_input.__file__
    lines: queue.SimpleQueue[bool] = queue.SimpleQueue()
    resume = threading.Semaphore(0)
    drawn: list[str] = []

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename != here:
            return None
        if event == "line":
            lines.put(True)  # paused here until this thread has drawn an id
            resume.acquire()
        return tracer

    def draw() -> None:
        sys.settrace(tracer)
        try:
            drawn.append(new_turn_id())
        finally:
            sys.settrace(None)
            lines.put(False)

    for warm in range(64):  # every offset in the buffer, the refill's included
        for _ in range(warm):
            new_turn_id()
        mine: list[str] = []
        thread = threading.Thread(target=draw)
        thread.start()
        while lines.get():
            mine.append(new_turn_id())
            resume.release()
        thread.join()
        assert drawn[-1] not in mine, (warm, drawn[-1])


def test_a_text_delta_event_built_without_its_init_equals_the_attrs_built_one() -> None:
    made, built = text_delta_event("Hé"), TextDeltaEvent(text="Hé")
    assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
    assert type(made) is TextDeltaEvent and made.type == "text_delta"
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made.text = "x"  # type: ignore[misc]


async def test_a_chats_next_turn_takes_no_sha256_digest(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """The system prompt's digest and the chat's prompt cache key are kept for the last
    prompt and the last chat (one entry each): the chat's next turn with the same prompt
    hashes nothing (it took both digests again: two SHA-256 per turn)."""
    await env.turn("first", tools=())
    digests: list[bytes] = []
    sha256 = hashing.hashlib.sha256

    def counted(data: bytes = b"") -> Any:
        digests.append(data)
        return sha256(data)

    monkeypatch.setattr(hashing.hashlib, "sha256", counted)
    outcome = await env.turn("second", tools=())
    assert outcome.final.strategy == "cursor" and outcome.committed
    assert digests == []
    assert hashing.system_prompt_hash("another prompt") == hashing._digest("another prompt")
    assert hashing.prompt_cache_key("chat-2") == "ts-" + sha256(
        b"turnstate prompt cache key\0chat-2").hexdigest()[:32]
    assert len(digests) == 3  # the new prompt (and _digest's own), the new chat's key


async def test_a_memory_turn_parses_back_no_timestamp_it_just_wrote(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``MemoryStore``'s begin and commit hand over the datetimes they formatted into
    the chat row (UTC-aware, as parsing gives them) instead of parsing the row's text
    back: only the chat's creation time is read (a cached parse); the records equal the
    row read back (it parsed six timestamps per turn)."""
    store = MemoryStore()
    chat = await store.create_chat(owner="o")
    parsed = record_calls(monkeypatch, _memory_turns.parse_ts, (_memory_turns, "parse_ts"),
                          (_rows, "parse_ts"))
    start = TurnStart(turn_id=new_turn_id(), user_parts=(TextPart(text="hi"),),
                      provider="openai", model="gpt-4o")
    lease = await store.begin_turn(chat.id, start)
    begun = dict(store._chats[chat.id])  # the row as the begin left it
    committed = await store.commit_turn(lease, TurnCommit(
        parts=(TextPart(text="yes"),), provider_state=None, audit=None, usage=None,
        context=None, strategy="replay", path=()))
    assert parsed == [chat_created(chat)] * 2  # the creation time, once per record
    monkeypatch.undo()
    assert committed == await store.load_chat(chat.id)
    assert lease.chat == store._record(begun)  # the row parsed back
    assert lease.chat.active_turn_expires_at == lease.expires_at


def chat_created(chat: Any) -> str:
    return _records.format_ts(chat.created_at)


def test_a_state_change_built_without_its_init_equals_the_attrs_built_one() -> None:
    for reason in (None, "cursor_expired"):
        made = state_changed("validate", "continue_with_cursor", "cursor", reason)
        built = StateChanged(source="validate", trigger="continue_with_cursor",
                             dest="cursor", reason=reason)
        assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
        assert type(made) is StateChanged and made.type == "state_changed"


async def test_memory_rows_are_written_in_their_tables_column_orders() -> None:
    """``MemoryStore`` builds a begin's rows as dict displays: every column, in order."""
    store = MemoryStore()
    chat = await store.create_chat(owner="o")
    lease = await store.begin_turn(chat.id, TurnStart(
        turn_id=new_turn_id(), user_parts=(TextPart(text="hi"),), provider="openai",
        model="gpt-4o"))
    for message_id in (lease.user_message_id, lease.assistant_message_id):
        assert tuple(store._messages[message_id]) == _rows.MESSAGE_COLUMNS
    assert tuple(store._turns[lease.turn_id]) == (*_rows.TURN_COLUMNS, "attached", "client_key")


async def test_a_fired_edge_takes_its_step_and_event_made_once(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fired edge's ``PathStep`` and its ``state_changed`` event are made once per edge
    and reason and shared by every turn (both frozen); each still equals the value its
    attrs ``__init__`` builds (the old code built both anew per fired edge)."""
    monkeypatch.setattr(_machine, "_STEPS", {})  # empty memos: none filled by other tests
    monkeypatch.setattr(_events, "_CHANGES", {})
    await env.turn("first", tools=())
    second = await env.turn("second", tools=())
    third = await env.turn("third", tools=())
    assert second.final.strategy == third.final.strategy == "cursor"
    steps, again = second.final.path, third.final.path
    assert len(steps) == 3 and all(a is b for a, b in zip(steps, again, strict=True))
    changes = [e for e in second.events if isinstance(e, StateChanged)]
    repeated = [e for e in third.events if isinstance(e, StateChanged)]
    assert len(changes) == 3 and all(a is b for a, b in zip(changes, repeated, strict=True))
    for step, change in zip(steps, changes, strict=True):
        assert step == PathStep(source=step.source, trigger=step.trigger, dest=step.dest,
                                reason=step.reason)
        assert change == StateChanged(source=step.source, trigger=step.trigger,
                                      dest=step.dest, reason=step.reason)
        assert type(step) is PathStep and type(change) is StateChanged


def test_the_edge_memos_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reasons may be a provider's codes: past the bound, values are made, not kept."""
    monkeypatch.setattr(_machine, "_STEPS", {})  # filled here, then given back
    monkeypatch.setattr(_events, "_CHANGES", {})
    for index in range(_machine._STEPS_KEPT + 10):
        reason = f"code-{index}"
        assert edge_step("cursor", "provider_failed", "abort", reason).reason == reason
        assert state_changed("cursor", "provider_failed", "abort", reason).reason == reason
    assert len(_machine._STEPS) <= _machine._STEPS_KEPT
    assert len(_events._CHANGES) <= _events._CHANGES_KEPT


async def test_a_cursor_turn_reads_its_responses_tool_calls_once(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ProviderResponse.tool_calls`` scans the response's parts on each read: a call
    step reads it once (it read it four times: the budget, the length cut, the stats,
    the trigger)."""
    await env.turn("first", tools=())
    reads: list[Any] = []
    prop = ProviderResponse.tool_calls

    def counted(self: ProviderResponse) -> Any:
        reads.append(self)
        return prop.fget(self)  # type: ignore[attr-defined]

    monkeypatch.setattr(ProviderResponse, "tool_calls", property(counted))
    outcome = await env.turn("second", tools=())
    assert outcome.final.strategy == "cursor" and outcome.committed
    assert len(reads) == 1
