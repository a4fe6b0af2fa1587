"""Scenarios of the cursor overflow: a cursor conversation that outgrew the model's
window degrades to a trimmed replay in the same turn (``cursor`` → ``replay`` on
``context_overflow``, the provider's refusal), or before sending (``validate`` →
``replay``, a critical last snapshot on a provider that does not compact the cursor's
conversation); the next turn continues by cursor (registered in ``SCENARIOS``)."""

from __future__ import annotations

import json
from typing import Any

from tests.engine.scenarios import (
    Env,
    ScriptStep,
    _degrades,
    _recovers,
    assert_committed,
    scenario,
    stored_envelope,
)
from turnstate.core import ContextSettings, TransitionPart

NO_COMPACTION = ContextSettings(provider_compaction_enabled=False)
CRITICAL = ('{"estimatedInputTokens":127000,"contextLimit":128000,'
            '"estimatedUsageRatio":0.9921875,"severity":"critical","source":"provider"}')


async def set_raw_context(env: Env, value: str | None) -> None:
    """Write ``chats.last_context_state`` behind the engine's back."""
    store: Any = env.store
    if hasattr(store, "_chats"):
        store._chats[env.chat_id]["last_context_state"] = value
        return
    await store.fetch_raw("UPDATE chats SET last_context_state = ? WHERE id = ?",
                          (value, env.chat_id))


@scenario
async def provider_refuses_the_cursor_s_length(env: Env) -> None:
    """The provider refuses the cursor turn (context_length_exceeded): the same turn
    replays, commits a fresh cursor, and the next turn continues by it."""
    await env.turn("one")
    before = await stored_envelope(env)
    env.backend.push("openai", ScriptStep.fail(400, "context_length_exceeded"),
                     ScriptStep.reply("fine"))
    outcome = await env.turn("two")
    assert_committed(outcome)
    assert outcome.triggers == ["continue_with_cursor", "context_overflow", "completed",
                                "committed"]
    assert outcome.final.strategy == "replay" and outcome.final.degradation == "context_overflow"
    assert env.backend.requests[-1].body["cursor"] is None
    parts = (await env.store.load_history(env.chat_id))[-1].parts
    assert [(p.reason, p.source_state, p.recovered) for p in parts
            if isinstance(p, TransitionPart)] == [("context_overflow", "cursor", True)]
    assert await stored_envelope(env) not in {None, before}
    await _recovers(env)


@scenario
async def critical_snapshot_replays_before_sending(env: Env) -> None:
    """A critical last snapshot with compaction off: context_overflow at validate (one
    request, no cursor); with compaction on, OpenAI keeps its cursor."""
    await env.turn("one")
    await set_raw_context(env, CRITICAL)
    sent = len(env.backend.requests)
    kept = await env.turn("compaction on")
    assert kept.triggers[0] == "continue_with_cursor"
    await set_raw_context(env, CRITICAL)
    outcome = await _degrades(env, "context_overflow", context=NO_COMPACTION)
    assert outcome.triggers[0] == "context_overflow"
    assert len(env.backend.requests) == sent + 2
    assert env.backend.requests[-1].body["cursor"] is None
    await _recovers(env, context=NO_COMPACTION)


TRIM = ContextSettings(overflow="trim")
LONG = "lorem ipsum dolor sit amet " * 4_500  # about 30,000 estimated tokens
ANTHROPIC = {"provider": "anthropic", "model": "claude-sonnet-4-5"}


def _history_sizes(env: Env) -> list[int]:
    return [len(r.body["history"]) for r in env.backend.requests]


@scenario
async def a_refused_local_loop_is_trimmed_again(env: Env) -> None:
    """The estimate fit, the provider counted more (Anthropic's "prompt is too long: N
    tokens > M maximum"): the local loop learns the scale from its figures and sends
    again without more of the oldest turns (``context_refused``, rule 10)."""
    for text in ("one", "two", "three"):
        assert_committed(await env.turn(f"{text} {LONG}", context=TRIM, **ANTHROPIC))
    too_long = "prompt is too long: 210000 tokens > 200000 maximum"
    env.backend.push("anthropic",
                     ScriptStep.fail(400, "context_length_exceeded", message=too_long),
                     ScriptStep.reply("fine"))
    outcome = await env.turn("four", context=TRIM, **ANTHROPIC)
    assert_committed(outcome)
    assert outcome.triggers == ["no_stored_state", "context_refused", "completed",
                                "committed"]
    sizes = _history_sizes(env)
    assert sizes[-1] < sizes[-2] == 6
    audit = json.loads((await env.store.load_history(env.chat_id))[-1].provider_state or "{}")
    assert audit["metadata"]["contextTrimmed"]["tokenScale"] > 2


@scenario
async def a_refused_trimmed_replay_is_trimmed_again(env: Env) -> None:
    """The cursor outgrew the window, and the trimmed replay was refused too (its text
    tokenises denser than the estimate): the replay goes again trimmed more, commits a
    fresh cursor, and the next turn continues by it."""
    for text in ("one", "two", "three"):
        assert_committed(await env.turn(f"{text} {LONG}", context=NO_COMPACTION))
    counted = ("The input token count (131000) exceeds the maximum number of tokens "
               "allowed (128000).")
    env.backend.push("openai", ScriptStep.fail(400, "context_length_exceeded"),
                     ScriptStep.fail(400, "context_length_exceeded", message=counted),
                     ScriptStep.reply("fine"))
    outcome = await env.turn("four", context=NO_COMPACTION)
    assert_committed(outcome)
    assert outcome.triggers == ["continue_with_cursor", "context_overflow", "context_refused",
                                "completed", "committed"]
    sizes = _history_sizes(env)
    assert sizes[-1] < sizes[-2]
    await _recovers(env, context=NO_COMPACTION)
