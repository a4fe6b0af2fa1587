"""Resuming from the final event a reader rebuilt (hunt-life).

A turn whose node died has no final event in its log; a follower rebuilds it from the
stored record and sends it with the id after the log's last. A stream that got it and
resumed from its id (an SSE ``Last-Event-ID`` after a reconnect) was refused as "beyond
this turn's last event" (the server's 400), where a stream resuming from a logged final
event ends at once with nothing more.
"""

from __future__ import annotations

import pytest

from tests.engine.support import Env
from turnstate.core._conversation import TextPart
from turnstate.core._errors import InvalidInput
from turnstate.engine import _follow
from turnstate.storage import TurnStart
from turnstate.storage._turn_log import LoggedEvent, turn_log_of


@pytest.fixture
def quick_follow(env: Env, monkeypatch: pytest.MonkeyPatch) -> Env:
    """Followers that poll every 10 ms, rebuild a missing final event at once and give a
    log no time to catch up (production: 2 s each)."""
    monkeypatch.setattr(_follow, "FINAL_GRACE_SECONDS", 0.0)
    monkeypatch.setattr(_follow, "FUTURE_GRACE_SECONDS", 0.0)
    env.engine.detached.configure(stop_poll_seconds=0.01)
    return env


async def _turn_with_log(env: Env, turn_id: str, *, final: bool) -> None:
    """A turn that logged two events (and its final one when ``final``) and ended: a
    node that died after its log write and was swept, or one that ended normally."""
    await env.store.begin_turn(env.chat_id, TurnStart(
        turn_id=turn_id, user_parts=(TextPart(text="hello?"),), provider="openai",
        model="gpt-4o", lease_seconds=30))
    events = [LoggedEvent(1, "state_changed", "{}"), LoggedEvent(2, "text_delta", "{}")]
    if final:
        events.append(LoggedEvent(3, "turn_aborted", "{}"))
    await turn_log_of(env.store).append(turn_id, events)
    env.clock.advance(seconds=31)
    assert await env.engine.detached.reclaim() == 1


async def test_a_stream_resuming_from_a_rebuilt_final_event_ends(quick_follow: Env) -> None:
    env = quick_follow
    await _turn_with_log(env, "dead", final=False)
    following = await env.engine.follow(env.chat_id, "dead", after=0)
    got = [event async for event in following.events]
    assert [(e.id, e.type) for e in got] == [(1, "state_changed"), (2, "text_delta"),
                                             (3, "turn_aborted")]
    resumed = await env.engine.follow(env.chat_id, "dead", after=3)
    assert [event async for event in resumed.events] == []
    with pytest.raises(InvalidInput):
        await env.engine.follow(env.chat_id, "dead", after=4)


async def test_past_a_logged_final_event_is_still_refused(quick_follow: Env) -> None:
    env = quick_follow
    await _turn_with_log(env, "ended", final=True)
    resumed = await env.engine.follow(env.chat_id, "ended", after=3)
    assert [event async for event in resumed.events] == []
    with pytest.raises(InvalidInput):
        await env.engine.follow(env.chat_id, "ended", after=4)
