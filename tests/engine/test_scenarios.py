"""Every engine scenario, run as its own test against every store backend."""

from __future__ import annotations

import itertools

import pytest

from tests.engine.scenarios import SCENARIOS
from tests.engine.support import Env
from turnstate.states import TRANSITIONS


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_scenario(env: Env, name: str) -> None:
    """The scenario's own assertions hold, and every turn's path is a path of the table."""
    await SCENARIOS[name](env)
    edges = {(e.source.value, e.trigger.value, e.dest.value) for e in TRANSITIONS}
    for outcome in env.outcomes:
        steps = outcome.path
        assert steps[0].source == "validate" and steps[-1].dest in {"done", "aborted"}
        for before, after in itertools.pairwise(steps):
            assert before.dest == after.source
        assert {(s.source, s.trigger, s.dest) for s in steps} <= edges
