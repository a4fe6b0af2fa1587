"""Together, the engine scenarios take every declared edge of the transition table."""

from __future__ import annotations

from tests.engine.conftest import _env
from tests.engine.scenarios import EXTRA_PATHS, SCENARIOS
from tests.engine.support import FakeClock
from turnstate.states import TRANSITIONS
from turnstate.storage import MemoryStore


async def test_every_edge_is_taken_by_a_scenario() -> None:
    """A new edge without a scenario that takes it fails this test."""
    taken: set[tuple[str, str, str]] = set()
    for scenario in SCENARIOS.values():
        clock = FakeClock()
        env = await _env(MemoryStore(clock=clock), clock)
        await scenario(env)
        paths = [o.path for o in env.outcomes] + EXTRA_PATHS.get(id(env), [])
        taken |= {(s.source, s.trigger, s.dest) for path in paths for s in path}
    declared = {(e.source.value, e.trigger.value, e.dest.value) for e in TRANSITIONS}
    assert declared - taken == set()
