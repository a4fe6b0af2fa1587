"""One place owns a turn's life (issue 20, item 6): read from the engine's source.

The turn's writes and its lease (take, renew, commit, abort, degradation write) are made
only by ``_lifecycle`` (its beginning in ``_life_begin``) and the two modules that hold
its mechanics (``_lease``: the heartbeat; ``_writes``: how each write is settled); the
states' actions (``_steps``) and the rest of the engine make none. ``TurnEngine`` is
configuration, not a mixin stack.
"""

from __future__ import annotations

import ast
from pathlib import Path

import turnstate.engine
from turnstate.engine import TurnEngine

ENGINE = Path(turnstate.engine.__file__).parent
TURN_WRITES = {"begin_turn", "renew_lease", "record_transition", "commit_turn", "abort_turn"}
OWNERS = {"_lifecycle.py", "_life_begin.py", "_lease.py", "_writes.py"}


def _calls(path: Path) -> set[str]:
    """The names of the turn's writes that ``path`` calls as methods."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.func.attr for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in TURN_WRITES}


def test_only_the_life_of_a_turn_writes_the_turn() -> None:
    calls = {path.name: _calls(path) for path in sorted(ENGINE.glob("*.py"))}
    writers = {name for name, made in calls.items() if made}
    assert writers <= OWNERS, {name: calls[name] for name in writers - OWNERS}
    assert set().union(*calls.values()) == TURN_WRITES  # every write has its one owner


def test_the_engine_has_no_mixin_bases() -> None:
    assert TurnEngine.__bases__ == (object,)
