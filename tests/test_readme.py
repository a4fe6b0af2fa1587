"""README.md stays true: its quick start and its library example."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_quick_start_is_exactly_two_commands() -> None:
    """The quick start block holds the install-and-demo command and the test command."""
    block = re.search(r"## Quick start\n\n```sh\n(.*?)```", README, re.S)
    assert block is not None
    assert block.group(1).splitlines() == [
        "python -m pip install -e '.[dev]' && turnstate demo", "python -m pytest"]


def test_library_example_runs(tmp_path: Path) -> None:
    """The "Using it" example runs as written and completes both turns."""
    code = re.search(r"## Using it\n\n```python\n(.*?)```", README, re.S)
    assert code is not None
    result = subprocess.run([sys.executable, "-c", code.group(1)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("turn_completed") == 2 and "text_delta" in result.stdout
