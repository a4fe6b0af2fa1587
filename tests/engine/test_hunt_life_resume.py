"""Resuming from the final event a reader rebuilt (hunt-life).

A turn whose node died has no final event in its log; a follower rebuilds it from the
stored record and sends it with ``REBUILT_FINAL_ID`` (until helper "resume3": the id
after the log's last, which an event the node sent but never logged may have had). A
stream that got it and resumed from its id (an SSE ``Last-Event-ID`` after a reconnect)
was refused as "beyond this turn's last event" (the server's 400), where a stream
resuming from a logged final event ends at once with nothing more.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from tests.engine.support import Env
from turnstate.core._conversation import TextPart
from turnstate.core._errors import InvalidInput
from turnstate.engine import _follow
from turnstate.storage import TurnStart
from turnstate.storage._turn_log import LoggedEvent, turn_log_of


@pytest.fixture
def quick_follow(env: Env, monkeypatch: pytest.MonkeyPatch) -> Env:
    """Followers that poll every 10 ms and rebuild a missing final event at once
    (production: 2 s)."""
    monkeypatch.setattr(_follow, "FINAL_GRACE_SECONDS", 0.0)
    env.engine.detached.configure(stop_poll_seconds=0.01)
    return env


async def _turn_with_log(env: Env, turn_id: str, *, final: bool, ended: bool = True) -> None:
    """A turn that logged two events (and its final one when ``final``) and ended: a
    node that died after its log write and was swept, or one that ended normally."""
    await env.store.begin_turn(env.chat_id, TurnStart(
        turn_id=turn_id, user_parts=(TextPart(text="hello?"),), provider="openai",
        model="gpt-4o", lease_seconds=30))
    events = [LoggedEvent(1, "state_changed", "{}"), LoggedEvent(2, "text_delta", "{}")]
    if final:
        events.append(LoggedEvent(3, "turn_aborted", "{}"))
    await turn_log_of(env.store).append(turn_id, events)
    if ended:
        await _dies(env)


async def _dies(env: Env) -> None:
    """The turn's node is gone: its lease runs out and the sweep ends the turn."""
    env.clock.advance(seconds=31)
    assert await env.engine.detached.reclaim() == 1


async def test_a_stream_resuming_from_a_rebuilt_final_event_ends(quick_follow: Env) -> None:
    env = quick_follow
    await _turn_with_log(env, "dead", final=False)
    following = await env.engine.follow(env.chat_id, "dead", after=0)
    got = [event async for event in following.events]
    rebuilt = _follow.REBUILT_FINAL_ID
    assert [(e.id, e.type) for e in got] == [(1, "state_changed"), (2, "text_delta"),
                                             (rebuilt, "turn_aborted")]
    resumed = await env.engine.follow(env.chat_id, "dead", after=rebuilt)
    assert [event async for event in resumed.events] == []


async def test_a_stream_that_saw_events_the_dead_node_never_logged_gets_the_end(
        quick_follow: Env) -> None:
    """The node's own streams sent events 3 and 4 before its log write (or its death): a
    client that saw them and resumes elsewhere gets the rebuilt end, not a refusal
    (helper "resume3": it was a 400, and the client never learned how the turn ended)."""
    env = quick_follow
    await _turn_with_log(env, "dead", final=False)
    for seen in (3, 4):
        resumed = await env.engine.follow(env.chat_id, "dead", after=seen)
        got = [event async for event in resumed.events]
        assert [(e.id, e.type) for e in got] == [(_follow.REBUILT_FINAL_ID, "turn_aborted")]


async def test_past_a_logged_final_event_is_still_refused(quick_follow: Env) -> None:
    env = quick_follow
    await _turn_with_log(env, "ended", final=True)
    resumed = await env.engine.follow(env.chat_id, "ended", after=3)
    assert [event async for event in resumed.events] == []
    with pytest.raises(InvalidInput):
        await env.engine.follow(env.chat_id, "ended", after=4)


async def test_a_resume_past_the_log_of_a_running_turn_follows_it_to_its_end(
        quick_follow: Env) -> None:
    """While the turn runs, an id past its log is one its node sent before its next log
    write: the stream waits for what follows it, and gets the rebuilt end when the node
    turns out to have died (it was refused after 2 s: the 400 a client whose node was
    SIGKILLed mid-answer got when it resumed on another node)."""
    env = quick_follow
    await _turn_with_log(env, "dying", final=False, ended=False)
    resumed = await env.engine.follow(env.chat_id, "dying", after=5)
    reading = asyncio.ensure_future(_all(resumed.events))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not reading.done()  # the turn runs: nothing yet, no refusal
    await _dies(env)
    got = await asyncio.wait_for(reading, 5)
    assert [(e.id, e.type) for e in got] == [(_follow.REBUILT_FINAL_ID, "turn_aborted")]
    assert '"reason":"lease_expired"' in got[0].data


async def _all(events: AsyncIterator[LoggedEvent]) -> list[LoggedEvent]:
    return [event async for event in events]


async def test_a_reclaimed_turn_s_followers_here_end_at_once(env: Env) -> None:
    """A turn the sweep ends ``lease_expired`` gets no final event from its node: the
    followers on the sweeping node are woken, and rebuild the end without the 2 s grace
    they give a live node's log (helper "resume3": a follower ended up to a poll and that
    grace, 4 s, after the sweep; 5.3 s after a takeover in two ``serve`` processes)."""
    env.engine.detached.configure(stop_poll_seconds=30.0)  # no poll stands in for the wake
    await _turn_with_log(env, "dying", final=False, ended=False)
    resumed = await env.engine.follow(env.chat_id, "dying", after=0)
    reading = asyncio.ensure_future(_all(resumed.events))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not reading.done()
    await _dies(env)
    got = await asyncio.wait_for(reading, 1.0)  # the grace alone is 2 s
    assert [(e.id, e.type) for e in got][-1] == (_follow.REBUILT_FINAL_ID, "turn_aborted")


async def test_a_dead_node_s_expired_log_still_gives_the_end_to_a_stream_that_saw_its_last(
        quick_follow: Env) -> None:
    """An expired log's rebuilt final event took the log's last id, the final event a
    live node writes last; a dead node's last logged event was a delta, so a client that
    saw it and came back after the retention got nothing (and one that saw more, a 400)."""
    env = quick_follow
    await _turn_with_log(env, "dead", final=False)
    env.clock.advance(seconds=1)
    assert await turn_log_of(env.store).expire(older_than=timedelta(0)) == 1
    for seen in (2, 3):
        resumed = await env.engine.follow(env.chat_id, "dead", after=seen)
        got = [event async for event in resumed.events]
        assert [(e.id, e.type) for e in got] == [(_follow.REBUILT_FINAL_ID, "turn_aborted")]
    from_start = await env.engine.follow(env.chat_id, "dead", after=0)
    assert from_start.notice == "log_expired"
    got = [event async for event in from_start.events]
    assert [(e.id, e.type) for e in got] == [(_follow.REBUILT_FINAL_ID, "turn_aborted")]
    resumed = await env.engine.follow(env.chat_id, "dead", after=_follow.REBUILT_FINAL_ID)
    assert [event async for event in resumed.events] == []
