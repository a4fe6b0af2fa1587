"""A plainly written reference model of the continuation policy.

It knows nothing of the engine: given what the chat row holds (as the model tracks it)
and the next turn, it says which strategy and degradation reason the turn should get,
whether it should commit, how many provider requests it should make, and what the
chat row should hold afterwards. The live property suite compares the engine with it
turn by turn.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import attrs

from turnstate.core._decisions import KEPT_UNTIL_COMMIT

DURABLE = {"openai": timedelta(days=30), "gemini": timedelta(days=55)}
"""Durable providers and how long their cursors live."""


@attrs.frozen
class Stored:
    """What the model believes ``chats.last_provider_state`` holds."""

    provider: str
    model: str
    prompt_hash: str
    tools_hash: str
    created_at: datetime
    alive: bool = True  # False once the provider has forgotten the cursor


@attrs.frozen
class Turn:
    provider: str
    model: str
    prompt_hash: str
    tools_hash: str
    rounds: int  # tool iterations the scripted model will ask for
    fault: str | None = None  # "fatal", "malformed", "transient", "cancel", "evict_mid_turn"
    evict_at: int = 1  # with "evict_mid_turn": the tool iteration during which it happens
    recover: bool = False  # TurnInput.recover_tool_results


@attrs.frozen
class Expected:
    strategy: str
    reason: str | None
    outcome: str  # "committed" or the abort trigger
    requests: int  # provider requests the turn makes (logical calls)
    stored_after: Stored | str | None  # "unchanged" for aborted turns that clear nothing


def validation(stored: Stored | None, turn: Turn, now: datetime) -> tuple[str, str | None]:
    """Strategy and reason decided before the first provider call."""
    durable = turn.provider in DURABLE
    fallback = "replay" if durable else "local_loop"
    if stored is None:
        return fallback, None
    if stored.provider != turn.provider:
        return fallback, "provider_changed"
    if stored.model != turn.model:
        return fallback, "model_changed"
    if stored.prompt_hash != turn.prompt_hash:
        return fallback, "system_prompt_changed"
    if stored.tools_hash != turn.tools_hash:
        return fallback, "toolset_changed"
    if now - stored.created_at > DURABLE[turn.provider]:
        return fallback, "cursor_expired"
    return "cursor", None


def expect(stored: Stored | None, turn: Turn, now: datetime) -> Expected:
    """What the engine must do with ``turn``."""
    strategy, reason = validation(stored, turn, now)
    # A changed provider, model, prompt or toolset keeps the stored cursor until the
    # degraded turn commits (issue 22); an unusable one is cleared at once.
    cleared = None if reason is not None and reason not in KEPT_UNTIL_COMMIT else "unchanged"
    if turn.fault == "cancel":
        return Expected(strategy, reason, "cancelled", 0, cleared)
    dead = strategy == "cursor" and stored is not None and not stored.alive
    # An HTTP error answers before the request is looked at; a broken stream can only
    # follow a request the provider accepted, so a dead cursor is refused first and the
    # replay retry streams normally.
    if turn.fault == "fatal" or (turn.fault == "malformed" and not dead):
        return Expected(strategy, reason, "provider_failed", 1, cleared)
    retry = 0
    if dead:
        # The provider forgot the cursor: one replay retry, nothing in flight yet.
        strategy, reason, retry = "replay", "cursor_expired", 1
        cleared = None
    if turn.fault == "evict_mid_turn" and turn.provider in DURABLE \
            and turn.rounds >= turn.evict_at:
        if not turn.recover or retry:
            # The cursor died while a tool ran: its result must not be silently dropped.
            return Expected(strategy, reason, "tool_result_cursor_loss",
                            1 + turn.evict_at + retry, cleared)
        return recovered(turn, reason, now)
    requests = 1 + turn.rounds + retry
    after = None
    if turn.provider in DURABLE:
        after = Stored(turn.provider, turn.model, turn.prompt_hash, turn.tools_hash, now)
    return Expected(strategy, reason, "committed", requests, after)


def recovered(turn: Turn, reason: str | None, now: datetime) -> Expected:
    """An opted-in turn whose cursor died while iteration ``evict_at``'s results were in
    flight: one replay carries them (and clears the stored cursor). The tools keep
    evicting, so if the model asks for another round its cursor dies again and the turn
    aborts; otherwise the replay's answer commits. Either way: 1 + iterations + 1."""
    reason = reason or "tool_result_cursor_loss"
    if turn.rounds > turn.evict_at:
        return Expected("replay", reason, "tool_result_cursor_loss", 1 + turn.evict_at + 2,
                        None)
    after = Stored(turn.provider, turn.model, turn.prompt_hash, turn.tools_hash, now)
    return Expected("replay", reason, "committed", 1 + turn.rounds + 1, after)
