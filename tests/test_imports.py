"""Every subpackage imports on its own, first, in a fresh interpreter (no import cycles),
and exports exactly what its ``__all__`` names."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PACKAGES = ["turnstate", "turnstate.core", "turnstate.engine", "turnstate.states",
            "turnstate.storage", "turnstate.providers", "turnstate.commands", "turnstate.cli",
            "turnstate.diagrams", "turnstate.emulators", "turnstate.testing"]


@pytest.mark.parametrize("name", PACKAGES)
def test_imports_first_in_a_fresh_interpreter(name: str) -> None:
    """Importing ``name`` before anything else works."""
    result = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", PACKAGES[1:7])
def test_all_names_exist(name: str) -> None:
    """Each public name in ``__all__`` is importable from the subpackage."""
    module = importlib.import_module(name)
    assert module.__all__ and all(hasattr(module, item) for item in module.__all__)


def test_the_runtime_never_imports_the_diagram_machine() -> None:
    """Running turns needs no GraphMachine (it restyles on every transition)."""
    code = ("import sys, turnstate.engine, turnstate.providers, turnstate.storage;"
            "print('transitions.extensions.diagrams' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=True)
    assert result.stdout.strip() == "False"
