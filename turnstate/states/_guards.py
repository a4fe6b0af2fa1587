"""The guards of the turn machine: small, named, pure functions of ``TurnFacts``.

The driver keeps a ``TurnFacts`` value per turn and replaces it (``attrs.evolve``)
whenever a fact changes; guards read it and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs


@attrs.frozen(kw_only=True)
class TurnFacts:
    """What the guards may know about a running turn.

    Attributes:
        durable: the turn's provider keeps a durable cursor.
        tool_results_in_flight: tool results exist only in memory (sent, or about to be
            sent, on a cursor that has not been committed).
        replay_retry_used: the turn already fell back from cursor to replay once (for a
            lost cursor before tools ran, or to recover in-flight tool results).
        recover_tool_results: the turn opted in to recovering in-flight tool results by
            replay when its cursor is lost (``TurnInput.recover_tool_results``).
        iterations_done: tool iterations completed so far.
        iteration_limit: the most tool iterations the turn may run.
        lease_held: the turn still holds its chat's lease (false once a renewal was
            refused, or the lease ran out while the store could not be reached).
        retrims_done: how many times the provider refused a replay or local-loop
            request of this turn as too long and it was sent again trimmed more.
    """

    durable: bool
    tool_results_in_flight: bool = False
    replay_retry_used: bool = False
    recover_tool_results: bool = False
    iterations_done: int = 0
    iteration_limit: int = 8
    lease_held: bool = True
    retrims_done: int = 0


MAX_RETRIMS = 3
"""How many times a turn sends a refused-as-too-long request again, trimmed more: with the
provider's figures one is enough; without them each doubles the scale."""


def is_durable(facts: TurnFacts) -> bool:
    return facts.durable


def is_stateless(facts: TurnFacts) -> bool:
    return not facts.durable


def tool_results_in_flight(facts: TurnFacts) -> bool:
    return facts.tool_results_in_flight


def no_tool_results_in_flight(facts: TurnFacts) -> bool:
    return not facts.tool_results_in_flight


def replay_retry_available(facts: TurnFacts) -> bool:
    return not facts.replay_retry_used


def recovery_enabled(facts: TurnFacts) -> bool:
    return facts.recover_tool_results


def recovery_unavailable(facts: TurnFacts) -> bool:
    """Not opted in, or the turn's one replay retry is spent."""
    return not facts.recover_tool_results or facts.replay_retry_used


def within_iteration_limit(facts: TurnFacts) -> bool:
    return facts.iterations_done <= facts.iteration_limit


def iteration_limit_reached(facts: TurnFacts) -> bool:
    return facts.iterations_done >= facts.iteration_limit


def lease_not_held(facts: TurnFacts) -> bool:
    return not facts.lease_held


def retrim_available(facts: TurnFacts) -> bool:
    return facts.retrims_done < MAX_RETRIMS


Guard = Callable[[TurnFacts], bool]

GUARDS: dict[str, Guard] = {
    guard.__name__: guard
    for guard in (
        is_durable,
        is_stateless,
        tool_results_in_flight,
        no_tool_results_in_flight,
        replay_retry_available,
        recovery_enabled,
        recovery_unavailable,
        within_iteration_limit,
        iteration_limit_reached,
        lease_not_held,
        retrim_available,
    )
}
"""Guard names as the table spells them, resolved by the machine factory."""
