"""``python -m turnstate`` runs the command line (hunt-api): it answered "No module named
turnstate.__main__", so only the console script or ``python -m turnstate.cli`` worked."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.cli.test_cli import ROOT


def test_python_dash_m_turnstate_is_the_command_line() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    shown = subprocess.run([sys.executable, "-m", "turnstate", "--version"], env=env,
                           capture_output=True, text=True, timeout=60, check=False)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("turnstate ")
    wrong = subprocess.run([sys.executable, "-m", "turnstate", "bogus"], env=env,
                           capture_output=True, text=True, timeout=60, check=False)
    assert wrong.returncode == 2 and "usage: turnstate" in wrong.stderr
