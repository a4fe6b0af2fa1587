"""State-machine cost per turn and engine overhead per turn (DESIGN.md section 9).

Baselines are measured in the same run:

* the machine against a hand-written dictionary lookup doing the same transitions;
* a whole turn through ``TurnEngine`` against a minimal hand-written loop that makes the
  same store calls and the same provider call (scripted, in-process) with no machine,
  no events and no degradation handling. The difference is the engine's own time.

Run: ``python benchmarks/bench_engine.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._util import amedian_us, figure, median_us, ratio, run
from turnstate.core import (
    ContextSettings,
    TextPart,
    Usage,
    context_snapshot,
    decide_continuation,
    decide_turn_persistence,
)
from turnstate.core._events import TurnCompleted, TurnEvent
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.emulators._scripted import ScriptedBackend
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers import ProviderCall
from turnstate.states import (
    GUARDS,
    TRANSITIONS,
    PathStep,
    State,
    Trigger,
    TurnFacts,
    TurnModel,
    shared_machine,
)
from turnstate.storage import MemoryStore, SqliteStore, Store, TurnCommit, TurnStart

CURSOR_PATH = (Trigger.CONTINUE_WITH_CURSOR, Trigger.COMPLETED, Trigger.COMMITTED)
TOOL_PATH = (Trigger.CONTINUE_WITH_CURSOR, Trigger.TOOL_CALLS, Trigger.TOOLS_DONE,
             Trigger.COMPLETED, Trigger.COMMITTED)


def machine_turn(triggers: tuple[Trigger, ...]) -> Callable[[], None]:
    machine = shared_machine()

    def turn() -> None:
        model = TurnModel(TurnFacts(durable=True))
        machine.add_model(model)
        for trigger in triggers:
            if trigger is Trigger.TOOLS_DONE:
                model.facts = TurnFacts(durable=True, iterations_done=1,
                                        tool_results_in_flight=True)
            model.fire(trigger)
        machine.remove_model(model)

    return turn


LIVE_TURNS = (0, 10_000, 50_000)


def machine_with_live_turns() -> None:
    """A turn joining and leaving the shared machine (and its 3 triggers) while 0, 10,000
    and 50,000 other turns are live in it (issue 26: flat, within 2x of idle)."""
    machine, live = shared_machine(), []
    idle = 0.0
    for count in LIVE_TURNS:
        while len(live) < count:
            model = TurnModel(TurnFacts(durable=True))
            machine.add_model(model)
            live.append(model)
        join_us = median_us(machine_join(), repeat=2000)
        turn_us = median_us(machine_turn(CURSOR_PATH), repeat=2000)
        idle = idle or join_us
        figure(f"machine add + remove, {count:>6} live turns", join_us,
               budget=2 * idle if count else None)
        figure(f"machine add + 3 triggers + remove, {count:>6} live turns", turn_us)
    machine.remove_model(live)


def machine_join() -> Callable[[], None]:
    machine = shared_machine()

    def join() -> None:
        model = TurnModel(TurnFacts(durable=True))
        machine.add_model(model)
        machine.remove_model(model)

    return join


def dict_turn(triggers: tuple[Trigger, ...]) -> Callable[[], None]:
    table: dict[tuple[State, Trigger], list[Any]] = {}
    for edge in TRANSITIONS:
        table.setdefault((edge.source, edge.trigger), []).append(edge)

    def turn() -> None:
        state, facts, path = State.VALIDATE, TurnFacts(durable=True), []
        for trigger in triggers:
            if trigger is Trigger.TOOLS_DONE:
                facts = TurnFacts(durable=True, iterations_done=1, tool_results_in_flight=True)
            edge = next(e for e in table[(state, trigger)]
                        if all(GUARDS[g](facts) for g in e.guards))
            path.append(PathStep(source=state.value, trigger=trigger.value,
                                 dest=edge.dest.value))
            state = edge.dest

    return turn


def turn_input(text: str, model: str = "gpt-4o") -> TurnInput:
    return TurnInput(provider="openai", model=model, system_prompt="Be terse.",
                     user_text=text)


async def engine_turn(engine: TurnEngine, chat_id: str, model: str = "gpt-4o") -> TurnEvent:
    """One turn; its last event (``turn_completed`` or ``turn_aborted``)."""
    events = [event async for event in engine.run_turn(chat_id, turn_input("hello", model))]
    return events[-1]


async def minimal_turn(store: Store, backend: ScriptedBackend, chat_id: str) -> None:
    """The same IO as a cursor turn, written by hand with no machine and no events."""
    adapter = backend.adapter("openai")
    turn = turn_input("hello")
    lease = await store.begin_turn(chat_id, TurnStart(
        turn_id=uuid.uuid4().hex, user_parts=(TextPart(text=turn.user_text),),
        provider="openai", model="gpt-4o"))
    chat = await store.load_chat(chat_id)
    ctx = turn.turn_context(chat.committed_seq, backend_now())
    decision = decide_continuation(chat.last_provider_state, ctx)
    model = DEFAULT_REGISTRY.model("openai", "gpt-4o")
    call = ProviderCall(strategy=decision.strategy, model=model,
                        system_prompt=turn.system_prompt, tools=(), settings=ContextSettings(),
                        user_text=turn.user_text,
                        cursor=decision.envelope.cursor if decision.envelope else None)
    request = adapter.build_request(call)
    parser = adapter.stream_parser()
    async for sse in backend.stream(request, adapter.classify_error):
        parser.feed(sse)
    response = parser.finish()
    state = adapter.envelope(ctx, response, loop_messages=(), now=backend_now(),
                             covers_seq=lease.assistant_seq)
    snapshot = context_snapshot(provider="openai", model="gpt-4o",
                                reported_input_tokens=response.usage.input_tokens,
                                estimated_tokens=0)
    await store.commit_turn(lease, TurnCommit(
        parts=response.parts, provider_state=decide_turn_persistence(state), audit=None,
        usage=response.usage, context=snapshot, strategy=decision.strategy.value, path=()))


def backend_now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


async def _timed_turns(label: str, store: Store, repeat: int,
                       turn: Callable[[str], Awaitable[None]]) -> float:
    """Median of ``turn`` on fresh chats that already hold one committed turn, so every
    measured turn is a cursor turn over the same small history."""
    samples = []
    for index in range(repeat + repeat // 10):
        chat = await store.create_chat(owner=f"bench-{label}")
        await turn(chat.id)  # the replay turn that stores a cursor (not measured)
        start = time.perf_counter_ns()
        await turn(chat.id)
        if index >= repeat // 10:
            samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


async def compare(label: str, store: Store, repeat: int) -> None:
    backend = ScriptedBackend()
    engine = TurnEngine(store, backend.adapters(), backend)
    engine_us = await _timed_turns(label, store, repeat,
                                   lambda chat: engine_turn(engine, chat))
    minimal_us = await _timed_turns(label, store, repeat,
                                    lambda chat: minimal_turn(store, backend, chat))
    figure(f"{label}: cursor turn through TurnEngine (median)", engine_us)
    figure(f"{label}: same IO, hand-written minimal loop (median)", minimal_us)
    figure(f"{label}: engine time per turn (difference)", engine_us - minimal_us,
           budget=1000)
    ratio(f"{label}: TurnEngine / minimal loop", engine_us, minimal_us)


HISTORY_LENGTHS = (10, 1_000, 10_000)
SAMPLES = 200
# A window that holds the 10,000 seeded messages (about 440,000 estimated tokens): on
# gpt-4o's 128,000 the replay turn before them aborts with context_overflow, stores no
# cursor, and every turn timed would be another aborted replay reading the history.
HISTORY_MODEL = "gpt-4.1"


async def seed_chat(store: Store, owner: str, messages: int) -> str:
    """A chat holding ``messages`` committed messages (half user, half assistant)."""
    chat = await store.create_chat(owner=owner)
    for index in range(messages // 2):
        lease = await store.begin_turn(chat.id, TurnStart(
            turn_id=uuid.uuid4().hex, user_parts=(TextPart(text=f"question {index} " * 8),),
            provider="openai", model="gpt-4o"))
        await store.commit_turn(lease, TurnCommit(
            parts=(TextPart(text=f"an answer of ordinary length, number {index} " * 6),),
            provider_state=None, audit=None, usage=Usage(), context=None, strategy="replay",
            path=()))
    return chat.id


class NotACursorTurn(RuntimeError):
    """A turn the history-length figures would have timed was not a cursor turn."""


async def cursor_turn(engine: TurnEngine, chat_id: str) -> None:
    """One turn on ``HISTORY_MODEL``, which must end as a committed cursor turn."""
    final = await engine_turn(engine, chat_id, HISTORY_MODEL)
    if not isinstance(final, TurnCompleted) or final.strategy != "cursor":
        msg = f"chat {chat_id}: expected a committed cursor turn, got {final!r}"
        raise NotACursorTurn(msg)


async def history_chats(store: Store, engine: TurnEngine, length: int, count: int) -> list[str]:
    """``count`` chats of ``length`` seeded messages, each after the replay turn that
    stores a cursor; raises ``NotACursorTurn`` if a chat's next turn is not a cursor turn
    (the one check turn is then part of the chat's history too)."""
    chats = [await seed_chat(store, f"len-{length}", length) for _ in range(count)]
    for chat_id in chats:
        final = await engine_turn(engine, chat_id, HISTORY_MODEL)  # the replay turn
        if not isinstance(final, TurnCompleted):
            msg = f"the replay turn over {length} messages did not commit: {final!r}"
            raise NotACursorTurn(msg)
        await cursor_turn(engine, chat_id)
    return chats


async def by_history_length(label: str, store: Store) -> None:
    """Engine time per cursor turn (a whole turn through TurnEngine, in-process scripted
    provider, no network) on chats holding 10, 1,000 and 10,000 messages.

    Each chat gets at most ``length // 50`` measured turns (so its history grows by at
    most 4% while measured), and enough chats are seeded for ``SAMPLES`` turns per
    length. The three lengths take turns (one turn each, round after round), so a change
    in the machine's load hits them alike. Wall time and process CPU time (all threads:
    the store's worker thread too) per turn. Every timed turn is checked to be a
    committed cursor turn (``NotACursorTurn`` otherwise), on a model whose window holds
    the 10,000 messages, so the replay turn before them commits its cursor.
    """
    backend = ScriptedBackend()
    engine = TurnEngine(store, backend.adapters(), backend)
    schedule: dict[int, list[str]] = {}
    for length in HISTORY_LENGTHS:
        per_chat = max(1, length // 50)
        chats = await history_chats(store, engine, length, -(-SAMPLES // per_chat))
        schedule[length] = (chats * per_chat)[:SAMPLES]
    gc.collect()
    gc.freeze()  # the seeded rows are not garbage: keep the collector off them
    wall: dict[int, list[int]] = {length: [] for length in HISTORY_LENGTHS}
    cpu: dict[int, list[int]] = {length: [] for length in HISTORY_LENGTHS}
    for index in range(SAMPLES):
        for length in HISTORY_LENGTHS:
            start, start_cpu = time.perf_counter_ns(), time.process_time_ns()
            await cursor_turn(engine, schedule[length][index])
            cpu[length].append(time.process_time_ns() - start_cpu)
            wall[length].append(time.perf_counter_ns() - start)
    gc.unfreeze()
    medians = {length: statistics.median(wall[length]) / 1000 for length in HISTORY_LENGTHS}
    for length in HISTORY_LENGTHS:
        figure(f"{label}: engine time per cursor turn, {length:>6} msgs (wall)",
               medians[length])
        figure(f"{label}: engine time per cursor turn, {length:>6} msgs (CPU)",
               statistics.median(cpu[length]) / 1000)
    ratio(f"{label}: slowest / fastest of the three (wall)", max(medians.values()),
          min(medians.values()), budget=1.2)
    ratio(f"{label}: 10,000 / 10 messages (wall)", medians[10_000], medians[10], budget=1.2)


async def tracing_overhead(repeat: int) -> None:
    """Per-turn cost of OpenTelemetry spans (issue 17): untraced, the no-op tracer (the
    API with no provider configured) and the SDK with an in-memory exporter. The three
    engines take turns, one cursor turn each per round, so machine noise hits all alike;
    the order changes every round (the three rotations, each forwards and backwards), so
    no engine always runs right after the same one (a turn inherits its predecessor's
    cache misses)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    sdk = TracerProvider()
    sdk.add_span_processor(SimpleSpanProcessor(exporter))
    backend = ScriptedBackend()
    options: dict[str, dict[str, Any]] = {
        "untraced": {"tracing": False}, "no-op tracer": {"tracing": True},
        "in-memory exporter": {"tracer_provider": sdk}}
    engines = {label: TurnEngine(MemoryStore(), backend.adapters(), backend, **kwargs)
               for label, kwargs in options.items()}
    samples: dict[str, list[int]] = {label: [] for label in engines}
    cpu: dict[str, list[int]] = {label: [] for label in engines}
    labels = list(engines)
    orders = [labels[shift:] + labels[:shift] for shift in range(len(labels))]
    orders += [order[::-1] for order in orders]
    for index in range(repeat + repeat // 10):
        for label in orders[index % len(orders)]:
            engine = engines[label]
            chat = await engine.store.create_chat(owner="bench-otel")
            await engine_turn(engine, chat.id)  # stores a cursor (not measured)
            start, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
            await engine_turn(engine, chat.id)
            if index >= repeat // 10:
                cpu[label].append(time.thread_time_ns() - start_cpu)
                samples[label].append(time.perf_counter_ns() - start)
        exporter.clear()
    medians = {label: statistics.median(values) / 1000 for label, values in samples.items()}
    cpus = {label: statistics.median(values) / 1000 for label, values in cpu.items()}
    base = medians["untraced"]
    figure("MemoryStore: cursor turn, untraced (median)", base)
    figure("MemoryStore: cursor turn, untraced, CPU (median)", cpus["untraced"])
    figure("tracing overhead per turn, no-op tracer", medians["no-op tracer"] - base,
           budget=50)
    figure("tracing overhead per turn, SDK + in-memory exporter",
           medians["in-memory exporter"] - base, budget=300)
    # CPU (this thread's) holds far steadier than wall on a shared machine, where a turn
    # waits for a core more often than it runs: the same overheads, measured in CPU.
    figure("tracing overhead per turn, no-op tracer, CPU",
           cpus["no-op tracer"] - cpus["untraced"], budget=50)
    figure("tracing overhead per turn, SDK + in-memory exporter, CPU",
           cpus["in-memory exporter"] - cpus["untraced"], budget=300)
    ratio("in-memory exporter / untraced", medians["in-memory exporter"], base)
    sdk.shutdown()


async def heartbeat_cost(repeat: int) -> None:
    """What the lease heartbeat (issue 20) costs a turn: starting and stopping its task
    (every turn pays this), and one renewal (a turn pays one per lease/3 it runs: none
    for a cursor turn of a few milliseconds, 360 an hour at the default 30 s lease)."""
    from turnstate.engine._lease import LeaseKeeper

    loop = asyncio.get_running_loop()
    for label, opened in (("MemoryStore", _memory_store()), ("SqliteStore file", None)):
        with tempfile.TemporaryDirectory() as folder:
            async with opened or SqliteStore.open(Path(folder) / "hb.sqlite") as store:
                chat = await store.create_chat(owner="bench-heartbeat")
                lease = await store.begin_turn(chat.id, TurnStart(
                    turn_id="hb", user_parts=(TextPart(text="x"),), provider="openai",
                    model="gpt-4o"))

                beats: list[Any] = [None]  # the queue of first beats, as the engine keeps

                async def start_stop(lease: Any = lease, store: Any = store,
                                     beats: list[Any] = beats) -> None:
                    keeper = LeaseKeeper(store, lease, lease_seconds=30, interval=10,
                                         sent_at=loop.time())
                    beats[0] = keeper.start(beats[0])
                    keeper.stop()
                    await asyncio.sleep(0)  # the cancelled task ends

                async def baseline() -> None:
                    await asyncio.sleep(0)

                cost = await amedian_us(start_stop, repeat=repeat) - \
                    await amedian_us(baseline, repeat=repeat)
                async def renew(lease: Any = lease, store: Any = store) -> None:
                    await store.renew_lease(lease, 30)

                renewal = await amedian_us(renew, repeat=repeat)
                figure(f"{label}: heartbeat task start + stop per turn", cost)
                figure(f"{label}: one lease renewal", renewal)


@contextlib.asynccontextmanager
async def _memory_store() -> Any:
    yield MemoryStore()


async def main() -> None:
    print("turnstate engine benchmark (medians; budgets from DESIGN.md section 9)")
    for name, triggers in (("cursor turn (3 triggers)", CURSOR_PATH),
                           ("tool turn (5 triggers)", TOOL_PATH)):
        machine_us = median_us(machine_turn(triggers), repeat=5000)
        dict_us = median_us(dict_turn(triggers), repeat=5000)
        figure(f"state machine per {name}", machine_us, budget=100)
        figure(f"hand-written dict lookup per {name}", dict_us)
        ratio(f"machine / dict lookup, {name}", machine_us, dict_us)
    machine_with_live_turns()
    await compare("MemoryStore", MemoryStore(), repeat=2000)
    await tracing_overhead(repeat=2000)
    with tempfile.TemporaryDirectory() as folder:
        async with SqliteStore.open(Path(folder) / "bench.sqlite") as store:
            await compare("SqliteStore file", store, repeat=500)
    await heartbeat_cost(repeat=2000)
    print("cursor turns by history length (O(1) in the history: within 20%)")
    await by_history_length("MemoryStore", MemoryStore())
    with tempfile.TemporaryDirectory() as folder:
        async with SqliteStore.open(Path(folder) / "history.sqlite") as store:
            await by_history_length("SqliteStore file", store)


def entry(main_fn: Callable[[], Awaitable[None]] = main) -> None:
    run(main_fn)


if __name__ == "__main__":
    entry()
