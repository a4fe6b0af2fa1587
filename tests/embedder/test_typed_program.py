"""``typed_program.py``, an embedder's code written from docs/api.md, type-checks under
``mypy --strict`` and runs (embedder3). Before, ``run_turn`` was annotated as returning an
``AsyncIterator``, which has no ``aclose``: the ``contextlib.aclosing(engine.run_turn(...))``
docs/api.md asks for was a mypy error in every embedder's strict code; and each event's
``type`` was a ``str``, so checking the tag (``if event.type == "turn_completed":``) left
``TurnEvent`` a union whose attributes strict code could not read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.embedder.typed_program import conversation
from turnstate import MemoryStore
from turnstate.emulators import EmulatedProviders
from turnstate.testing import emulated_providers

__all__ = ["emulated_providers"]  # the fixture, imported for pytest

PROGRAM = Path(__file__).with_name("typed_program.py")
TESTING = Path(__file__).with_name("test_embed5_testing.py")  # an embedder's own pytest
EMBED7 = [Path(__file__).with_name(f"embed7_{name}_program.py")  # embed7's three embedders
          for name in ("tools", "worker", "switch")]
EXAMPLE = Path(__file__).parent.parent.parent / "examples" / "sse_backend.py"  # the shipped one


def test_the_embedders_program_type_checks_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    # in its own process: mypy's main raises the interpreter's recursion limit (2**14),
    # which would leak into the tests run after this one
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
         "--cache-dir", str(tmp_path / "cache"), str(PROGRAM), str(TESTING),
         *map(str, EMBED7), str(EXAMPLE)],
        capture_output=True, text=True, timeout=300, check=False,
        cwd=PROGRAM.parent.parent.parent)  # the checkout, whose turnstate is checked
    assert checked.returncode == 0, checked.stdout + checked.stderr


async def test_the_embedders_program_runs(emulated_providers: EmulatedProviders) -> None:
    lines, ids, cost = await conversation(MemoryStore(), emulated_providers.adapters)
    assert lines[-2:] == ["turn_completed", lines[-1]]
    assert lines[-1].startswith("stop ") and "You said" in "".join(lines)
    assert ids[0] == 1 and ids == sorted(ids)
    assert cost is not None and cost > 0
