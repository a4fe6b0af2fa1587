# Theory of operation
# ===================
#
# Every turn of a chat runs through the machine declared below, and only through it.
# The table is data: the engine, the diagram generator and the tests all read this one
# constant, and nothing adds a transition at run time. A rule the diagram should show
# must therefore live here, as an edge or as a named guard, never as an `if` in the
# driver (h11 learned this the hard way; its diagrams could not see code).
#
# Rules:
#
# 1. `validate` is the only entry. Its action decides the continuation once, before the
#    first provider call, and fires exactly one of: `continue_with_cursor`, a
#    degradation reason, or `no_stored_state`. The decision never changes mid-turn
#    except through the declared cursor-loss edges out of `cursor`.
# 2. A provider-reported cursor loss (`cursor_expired` / `cursor_invalid`) in `cursor`
#    goes to `replay` only while no tool results are in flight and the replay retry is
#    unused. With results in flight, replaying the database would silently drop them,
#    so by default the turn aborts with `tool_result_cursor_loss`.
# 2a. A turn that opted in (`recovery_enabled`) instead recovers: `tool_result_cursor_loss`
#    goes to `replay`, whose request carries the committed history, the user's message
#    and this turn's tool calls with their results (the tools are not run again). It
#    spends the turn's one replay retry, so a second loss aborts; and a replay that
#    fails while it carries those results aborts with `tool_result_cursor_loss` too
#    (`replay` only ever has results in flight while it recovers them).
# 3. Guards are pure functions of `TurnFacts`; callbacks only record the path. All IO
#    (HTTP, tools, storage) is done by the async driver between triggers.
# 4. Every path ends in `done` or `aborted`; the factory checks this (and reachability,
#    exits and guard names) when the shared machine is built.
# 5. A turn holds its chat's lease from `validate` on, so every state that does work
#    (all but `abort`) has a `cancelled` and an `internal_error` edge into `abort`: the
#    consumer leaving, a cancelled task or a bug in the driver still ends the turn
#    recorded as `aborted` and releases the lease (issue 12).
# 6. The lease is short and renewed while the turn runs (issue 20). Every state that does
#    work has a `lease_lost` edge into `abort`, guarded by `lease_not_held`: once a
#    renewal is refused, or the lease ran out while the store could not be reached, the
#    turn stops before its next side effect (no provider request, no tool run). Every
#    state that reads or writes the store outside the commit has a `storage_failed` edge:
#    a store that fails after the turn began is reported as what it is.
# 7. A stop asked by a user (`TurnEngine.stop`, from any node) ends a running turn with
#    `stopped`: an edge into `abort` from every state that generates (`validate`, the call
#    states, `tool_iteration`). `persist` has none on purpose: once the commit is sent,
#    its outcome decides, so a stop racing the commit ends the turn exactly once, either
#    `done` or `aborted` with `stopped`, never both.
# 8. Before a `replay` or `local_loop` request the driver compares the estimated input
#    with the model's context limit. When it does not fit (after trimming the oldest
#    whole turns, if the request opted in), `context_overflow` goes to `abort` before any
#    request is sent, its detail naming both figures (issue 22).
# 9. The cursor's conversation outgrew the model's window (issue: a Gemini Interactions
#    chat, or an OpenAI one with compaction off, died for good once the provider refused
#    its cursor with a context-length error). `context_overflow` is then a degradation:
#    `cursor` goes to `replay` like a lost cursor (same guards: no results in flight, retry
#    unused; with results in flight it is `tool_result_cursor_loss`), and `validate` goes
#    to `replay` before sending when the last committed snapshot is already critical.
#    That replay trims the oldest whole turns to well inside the window whatever the
#    request's overflow policy, and its commit stores a fresh cursor. Out of `replay` and
#    `local_loop` the same trigger still aborts: the history alone does not fit (rule 8).
# 10. The estimate (four characters a token) can be far below the provider's own count
#    (CJK text, code, base64-like text). When the provider refuses a `replay` or
#    `local_loop` request as longer than the window, and the turn may trim (its overflow
#    policy is `trim`, or it replays after `context_overflow`), `context_refused` loops
#    back to the same state: the driver learnt a scale from the refusal (its figures when
#    it gave them) and the request goes again with more of the oldest whole turns left
#    out. `retrim_available` bounds the loop (`MAX_RETRIMS` a turn). When no trim helps
#    (the newest turn alone is too long, the retries are spent, or the turn may not
#    trim) the turn aborts `context_overflow`, naming the provider's figures; the stored
#    cursor, if any, is kept and the next, smaller message goes on.
# 11. A turn has a bounded life (`TurnLimits.turn_seconds`, `TurnInput.deadline_seconds`).
#    Past its deadline a turn ends with `deadline_exceeded`: an edge into `abort` from
#    every state a stop ends (`validate`, the call states, `tool_iteration`); the provider
#    call or tool run in flight is cancelled, and a provider retry whose wait would end
#    past the deadline is not attempted. `persist` has none, as for `stopped` (rule 7):
#    an answer whose commit is sent is kept, however late.
#
# Trade-off, stated plainly: triggers shared by several sources (`cancelled`,
# `tool_calls`) make the table longer than a wildcard would, but every edge is then
# visible in the diagram and countable by the edge-coverage test.

"""The turn state machine's states, triggers and transition table."""

from __future__ import annotations

from enum import StrEnum

import attrs


class State(StrEnum):
    VALIDATE = "validate"
    CURSOR = "cursor"
    REPLAY = "replay"
    LOCAL_LOOP = "local_loop"
    TOOL_ITERATION = "tool_iteration"
    PERSIST = "persist"
    ABORT = "abort"
    DONE = "done"
    ABORTED = "aborted"


INITIAL = State.VALIDATE
FINAL_STATES = frozenset({State.DONE, State.ABORTED})
CALL_STATES = frozenset({State.CURSOR, State.REPLAY, State.LOCAL_LOOP})


class Trigger(StrEnum):
    CONTINUE_WITH_CURSOR = "continue_with_cursor"
    NO_STORED_STATE = "no_stored_state"
    PROVIDER_CHANGED = "provider_changed"
    MODEL_CHANGED = "model_changed"
    SYSTEM_PROMPT_CHANGED = "system_prompt_changed"
    TOOLSET_CHANGED = "toolset_changed"
    CURSOR_EXPIRED = "cursor_expired"
    CURSOR_INVALID = "cursor_invalid"
    ENVELOPE_MALFORMED = "envelope_malformed"
    TOOL_RESULT_CURSOR_LOSS = "tool_result_cursor_loss"
    TOOL_CALLS = "tool_calls"
    TOOLS_DONE = "tools_done"
    COMPLETED = "completed"
    PROVIDER_FAILED = "provider_failed"
    CONTEXT_OVERFLOW = "context_overflow"
    CONTEXT_REFUSED = "context_refused"
    CANCELLED = "cancelled"
    STOPPED = "stopped"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    INTERNAL_ERROR = "internal_error"
    LEASE_LOST = "lease_lost"
    STORAGE_FAILED = "storage_failed"
    TOOL_ITERATION_LIMIT = "tool_iteration_limit"
    COMMIT_CONFLICT = "commit_conflict"
    COMMIT_FAILED = "commit_failed"
    COMMITTED = "committed"
    ABORT_RECORDED = "abort_recorded"


DEGRADATION_TRIGGERS = (
    Trigger.PROVIDER_CHANGED,
    Trigger.MODEL_CHANGED,
    Trigger.SYSTEM_PROMPT_CHANGED,
    Trigger.TOOLSET_CHANGED,
    Trigger.CURSOR_EXPIRED,
    Trigger.CURSOR_INVALID,
    Trigger.ENVELOPE_MALFORMED,
    Trigger.CONTEXT_OVERFLOW,
)


@attrs.frozen
class Edge:
    """One declared transition. ``guards`` name functions in ``turnstate.states._guards``."""

    trigger: Trigger
    source: State
    dest: State
    guards: tuple[str, ...] = ()


def _edges() -> tuple[Edge, ...]:
    e = Edge
    validate, cursor, replay, loop = (State.VALIDATE, State.CURSOR, State.REPLAY,
                                      State.LOCAL_LOOP)
    tools, persist, abort = State.TOOL_ITERATION, State.PERSIST, State.ABORT
    edges = [
        e(Trigger.CONTINUE_WITH_CURSOR, validate, cursor, ("is_durable",)),
        e(Trigger.NO_STORED_STATE, validate, replay, ("is_durable",)),
        e(Trigger.NO_STORED_STATE, validate, loop, ("is_stateless",)),
        *(e(t, validate, replay, ("is_durable",)) for t in DEGRADATION_TRIGGERS),
        e(Trigger.PROVIDER_CHANGED, validate, loop, ("is_stateless",)),
        e(Trigger.ENVELOPE_MALFORMED, validate, loop, ("is_stateless",)),
        e(Trigger.CANCELLED, validate, abort),
        e(Trigger.STOPPED, validate, abort),
        e(Trigger.DEADLINE_EXCEEDED, validate, abort),
        e(Trigger.INTERNAL_ERROR, validate, abort),
        e(Trigger.LEASE_LOST, validate, abort, ("lease_not_held",)),
        e(Trigger.STORAGE_FAILED, validate, abort),
        e(Trigger.CURSOR_EXPIRED, cursor, replay,
          ("no_tool_results_in_flight", "replay_retry_available")),
        e(Trigger.CURSOR_INVALID, cursor, replay,
          ("no_tool_results_in_flight", "replay_retry_available")),
        e(Trigger.CONTEXT_OVERFLOW, cursor, replay,
          ("no_tool_results_in_flight", "replay_retry_available")),
        e(Trigger.TOOL_RESULT_CURSOR_LOSS, cursor, abort,
          ("tool_results_in_flight", "recovery_unavailable")),
        e(Trigger.TOOL_RESULT_CURSOR_LOSS, cursor, replay,
          ("tool_results_in_flight", "recovery_enabled", "replay_retry_available")),
        e(Trigger.TOOL_RESULT_CURSOR_LOSS, replay, abort, ("tool_results_in_flight",)),
    ]
    for call_state in (cursor, replay, loop):
        edges += [
            e(Trigger.TOOL_CALLS, call_state, tools),
            e(Trigger.COMPLETED, call_state, persist),
            e(Trigger.PROVIDER_FAILED, call_state, abort),
            e(Trigger.CANCELLED, call_state, abort),
            e(Trigger.STOPPED, call_state, abort),
            e(Trigger.DEADLINE_EXCEEDED, call_state, abort),
            e(Trigger.INTERNAL_ERROR, call_state, abort),
            e(Trigger.LEASE_LOST, call_state, abort, ("lease_not_held",)),
            e(Trigger.STORAGE_FAILED, call_state, abort),
        ]
    # The replayed history does not fit the model's window: abort before calling (rule 8).
    edges += [e(Trigger.CONTEXT_OVERFLOW, replay, abort), e(Trigger.CONTEXT_OVERFLOW, loop, abort)]
    # The provider refused it as too long all the same: send it again, trimmed more (rule 10).
    edges += [e(Trigger.CONTEXT_REFUSED, replay, replay, ("retrim_available",)),
              e(Trigger.CONTEXT_REFUSED, loop, loop, ("retrim_available",))]
    edges += [
        e(Trigger.TOOLS_DONE, tools, cursor, ("is_durable", "within_iteration_limit")),
        e(Trigger.TOOLS_DONE, tools, loop, ("is_stateless", "within_iteration_limit")),
        e(Trigger.TOOL_ITERATION_LIMIT, tools, abort, ("iteration_limit_reached",)),
        e(Trigger.CANCELLED, tools, abort),
        e(Trigger.STOPPED, tools, abort),
        e(Trigger.DEADLINE_EXCEEDED, tools, abort),
        e(Trigger.INTERNAL_ERROR, tools, abort),
        e(Trigger.LEASE_LOST, tools, abort, ("lease_not_held",)),
        e(Trigger.COMMITTED, persist, State.DONE),
        e(Trigger.COMMIT_CONFLICT, persist, abort),
        e(Trigger.COMMIT_FAILED, persist, abort),
        e(Trigger.CANCELLED, persist, abort),
        e(Trigger.INTERNAL_ERROR, persist, abort),
        e(Trigger.LEASE_LOST, persist, abort, ("lease_not_held",)),
        e(Trigger.ABORT_RECORDED, abort, State.ABORTED),
    ]
    return tuple(edges)


TRANSITIONS: tuple[Edge, ...] = _edges()
"""Every edge of the turn machine. Read by the engine, the diagrams and the tests."""

STOPPABLE_STATES = frozenset(e.source for e in TRANSITIONS if e.trigger is Trigger.STOPPED)
"""The states a stop request ends at once (``stopped``); elsewhere the turn is ending."""
