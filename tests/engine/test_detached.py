"""Detached turns (issue 21): the log's write rate, its size cap, a turn run to its end
without a consumer, and the in-process fan-out."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence

from tests.engine.support import Env, make_turn
from turnstate.core._conversation import TextPart
from turnstate.core._errors import StorageError
from turnstate.core._events import TextDeltaEvent, TurnAborted, TurnEvent, TurnStats
from turnstate.emulators._scripted import ScriptStep
from turnstate.engine import TurnInput
from turnstate.engine._live import LiveTurn
from turnstate.storage import TurnStart, TurnStatus
from turnstate.storage._turn_log import LogBatch, TurnLog, turn_log_of


def count_appends(env: Env) -> list[int]:
    """Record the size (events of every turn) of every log write of ``env``'s store."""
    log = turn_log_of(env.store)
    sizes: list[int] = []
    original = log.append_many

    async def counted(batches: Sequence[LogBatch]) -> tuple[StorageError | None, ...]:
        sizes.append(sum(len(batch.events) for batch in batches))
        return await original(batches)

    log.append_many = counted  # type: ignore[method-assign]
    return sizes


def gate_log(env: Env) -> tuple[TurnLog, asyncio.Event]:
    """``env``'s turn log, whose writes wait until the returned event is set."""
    log = turn_log_of(env.store)
    gate, original = asyncio.Event(), log.append_many

    async def gated(batches: Sequence[LogBatch]) -> Sequence[StorageError | None]:
        await gate.wait()
        return await original(batches)

    log.append_many = gated  # type: ignore[method-assign]
    return log, gate


async def test_the_log_is_written_in_batches_at_most_20_times_a_second(env: Env) -> None:
    """500 deltas never cost 500 writes: one write per 50 ms at most, the final last."""
    sizes = count_appends(env)
    env.backend.push("openai", ScriptStep.reply("word " * 500, chunks=500))
    began = time.monotonic()
    live = await env.engine.start_turn(env.chat_id, make_turn("many deltas"))
    events = [e async for e in (await env.engine.follow(env.chat_id, live.turn_id)).events]
    await env.engine.detached.settled()
    took = time.monotonic() - began
    assert sum(e.type == "text_delta" for e in events) == 500
    assert sum(sizes) == len(events) == events[-1].id
    assert len(sizes) <= 20 * took + 1, (sizes, took)
    page = await turn_log_of(env.store).read(env.chat_id, live.turn_id)
    assert [e.id for e in page.events] == list(range(1, len(events) + 1))


async def test_deltas_arriving_one_by_one_still_cost_at_most_20_writes_a_second(
        env: Env) -> None:
    """The writer, fed one delta per turn of the event loop (so an unthrottled writer
    would write each one alone), writes in batches; the final event lands last."""
    sizes = count_appends(env)
    lease = await env.store.begin_turn(env.chat_id, TurnStart(
        turn_id="t-rate", user_parts=(TextPart(text="x"),), provider="openai",
        model="gpt-4o"))
    live = LiveTurn(chat_id=env.chat_id, turn_id=lease.turn_id, owner=None,
                    provider="openai", cap_bytes=10**7)
    detached = env.engine.detached
    began = time.monotonic()
    for index in range(300):
        detached._publish(live, TextDeltaEvent(text=f"d{index} "), f'{{"text":"d{index}"}}')
        for _ in range(3):
            await asyncio.sleep(0)  # one turn of the loop: the writer may run
    final = TurnAborted(turn_id=lease.turn_id, chat_id=env.chat_id, reason="cancelled",
                        detail=None, strategy=None, degradation=None, path=(),
                        stats=TurnStats())
    detached._publish(live, final, "{}")
    await live.logged.wait()
    took = time.monotonic() - began
    assert sum(sizes) == 301 and len(sizes) <= 20 * took + 1, (len(sizes), took)
    page = await turn_log_of(env.store).read(env.chat_id, lease.turn_id)
    assert page.events[-1].final and page.last_id == 301


async def test_a_turn_nobody_follows_runs_to_its_end_and_commits(env: Env) -> None:
    live = await env.engine.start_turn(env.chat_id, make_turn("alone"))
    await env.engine.detached.settled()
    record = await env.store.load_turn(live.turn_id)
    assert record.status is TurnStatus.COMPLETED
    assert env.engine.detached.live == {}


async def test_past_the_cap_the_log_keeps_only_the_final_event_and_resume_says_so(
        env: Env) -> None:
    env.engine.detached.configure(cap_bytes=2_000)
    env.backend.push("openai", ScriptStep.reply("word " * 200, chunks=200))
    live = await env.engine.start_turn(env.chat_id, make_turn("too long"))
    await env.engine.detached.settled()
    page = await turn_log_of(env.store).read(env.chat_id, live.turn_id)
    assert page.truncated and [e.type for e in page.events] == ["turn_completed"]
    following = await env.engine.follow(env.chat_id, live.turn_id, after=3)
    assert following.notice == "log_truncated"
    rest = [e async for e in following.events]
    assert [e.type for e in rest] == ["turn_completed"] and rest[0].id == page.last_id
    assert '"text":"' + "word " * 10 in rest[0].data  # the final event holds the answer


async def test_followers_on_one_process_share_one_list(env: Env) -> None:
    """Many followers of a running turn see the same events, none copied per follower."""
    live = await env.engine.start_turn(env.chat_id, make_turn("shared"))
    followings = [await env.engine.follow(env.chat_id, live.turn_id) for _ in range(50)]
    seen = [[e async for e in f.events] for f in followings]
    assert all(s == seen[0] for s in seen) and seen[0][-1].final


async def test_the_turns_on_one_process_share_each_log_write(env: Env) -> None:
    """One writer for every turn here: turns that publish between two ticks are written
    together, in one ``append_many``, each with its own events."""
    sizes = count_appends(env)
    detached, lives = env.engine.detached, []
    for index in range(3):
        chat = await env.store.create_chat(owner="o")
        lease = await env.store.begin_turn(chat.id, TurnStart(
            turn_id=f"t-shared-{index}", user_parts=(TextPart(text="x"),),
            provider="openai", model="gpt-4o"))
        lives.append(LiveTurn(chat_id=chat.id, turn_id=lease.turn_id, owner=None,
                              provider="openai", cap_bytes=10**7))
    for live in lives:  # no suspension in between: all before the writer's tick
        detached._publish(live, TextDeltaEvent(text="a"), '{"text":"a"}')
        detached._publish(live, TurnAborted(
            turn_id=live.turn_id, chat_id=live.chat_id, reason="cancelled", detail=None,
            strategy=None, degradation=None, path=(), stats=TurnStats()), "{}")
    await asyncio.gather(*(live.logged.wait() for live in lives))
    assert sizes == [6]
    for live in lives:
        page = await turn_log_of(env.store).read(live.chat_id, live.turn_id)
        assert [e.id for e in page.events] == [1, 2] and page.events[-1].final


def test_a_live_turn_gives_the_kept_events_after_any_id() -> None:
    """``after`` by slicing: every id from 0 to the last, before and after the cap
    dropped the events so far (only the final one is then kept)."""
    final = TurnAborted(turn_id="t", chat_id="c", reason="cancelled", detail=None,
                        strategy=None, degradation=None, path=(), stats=TurnStats())
    live = LiveTurn(chat_id="c", turn_id="t", owner=None, provider="openai", cap_bytes=60)
    for index in range(3):
        live.publish(TextDeltaEvent(text=str(index)), f'"{index}"')
    for after in range(5):
        assert [e.id for e in live.after(after)] == [i for i in (1, 2, 3) if i > after]
    live.publish(TextDeltaEvent(text="x"), '"' + "x" * 60 + '"')  # past the cap: dropped
    live.publish(final, "{}")
    for after in range(7):
        assert [e.id for e in live.after(after)] == ([5] if after < 5 else [])


async def test_a_follower_sends_the_final_event_before_the_turn_s_teardown_runs(
        env: Env) -> None:
    """The runner lets the streams take the final event (one loop step) before it runs
    what follows it (closing the engine's generators, ``on_finished``): that is on every
    served turn's latency path (issue 26)."""
    order: list[str] = []
    run_turn = env.engine.run_detached_turn  # the runner's generator

    async def traced(chat_id: str, turn: TurnInput) -> AsyncIterator[TurnEvent]:
        async for event in run_turn(chat_id, turn):
            await asyncio.sleep(0)  # as a provider's stream does: the follower waits
            yield event
            if event.type in ("turn_completed", "turn_aborted"):
                order.append("teardown")

    env.engine.run_detached_turn = traced  # type: ignore[method-assign]
    live = await env.engine.start_turn(env.chat_id, make_turn("final first"))

    async def follow() -> None:
        async for batch in live.follow_batches(0):
            if batch[-1].final:
                order.append("final sent")

    await asyncio.gather(follow(), env.engine.detached.settled())
    assert order == ["final sent", "teardown"]


async def test_a_turn_s_runner_ends_without_waiting_for_its_log_write(env: Env) -> None:
    """The runner task ends with the turn; the turn stays followable here until the writer
    has logged its final event, and ``settled`` waits for that (a task step and a wait
    less per turn, issue 26)."""
    log, gate = gate_log(env)
    detached = env.engine.detached
    live = await env.engine.start_turn(env.chat_id, make_turn("not yet logged"))
    assert live.task is not None
    await asyncio.wait_for(asyncio.shield(live.task), 2)
    assert live.done and not live.logged.is_set() and detached.live == {live.turn_id: live}
    following = await env.engine.follow(env.chat_id, live.turn_id, after=1)
    assert [e async for e in following.events][-1].final  # from memory
    settling = asyncio.ensure_future(detached.settled())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not settling.done()
    gate.set()
    await settling
    assert detached.live == {}
    page = await log.read(env.chat_id, live.turn_id)
    assert page.events[-1].final


async def test_a_retried_turn_id_waits_for_the_first_turn_s_log_and_keeps_it(
        env: Env) -> None:
    """A turn started again with the id of one that ran out here but is not yet logged
    (a client's retry) waits for that log write, then gets the stored outcome: the
    first turn stays here until it is logged, the log keeps its events, and the retry's
    entry is not let go by the first turn's write (both were keyed by the id only)."""
    log, gate = gate_log(env)
    detached = env.engine.detached
    first = await env.engine.start_turn(env.chat_id, make_turn("once", turn_id="t-again"))
    assert first.task is not None
    await asyncio.wait_for(asyncio.shield(first.task), 2)
    retrying = asyncio.ensure_future(
        env.engine.start_turn(env.chat_id, make_turn("once", turn_id="t-again")))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not retrying.done() and detached.live == {"t-again": first}
    gate.set()
    retry = await asyncio.wait_for(retrying, 2)
    assert retry is not first and first.logged.is_set()
    following = await env.engine.follow(env.chat_id, "t-again", after=0)
    events = [e async for e in following.events]
    assert events[-1].type == "turn_completed"
    await detached.settled()
    assert detached.live == {}
    page = await log.read(env.chat_id, "t-again")
    assert [e.id for e in page.events] == list(range(1, first.last_id + 1))
    assert page.events[-1].final
