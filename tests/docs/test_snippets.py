"""Every code snippet of README.md and docs/api.md runs as written and type-checks under
``mypy --strict`` (embed4), and every name the two pages say to import is importable from
the module they name.

A ``python`` block runs in a fresh process (its own working directory, the emulators on
loopback, nothing on the network). A block that cannot run alone is preceded by the line
``<!-- snippet: needs MODULE: why -->``: the test then writes MODULE as a small shim over a
package store and runs the block against it, so an unmarked block that needs anything
but the package fails here, and so does a marked one whose code is wrong.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("README.md", "docs/api.md")
FENCE = re.compile(r"(?:^<!-- snippet: needs ([\w.]+): [^\n]+ -->\n)?^```python\n(.*?)^```",
                   re.S | re.M)
SHIMS = {"my_app.store": (
    "from __future__ import annotations\n\n"
    "from contextlib import AbstractAsyncContextManager, nullcontext\n\n"
    "from turnstate import MemoryStore\n"
    "from turnstate.testing import ManualClock\n\n\n"
    "class MyStore(MemoryStore):\n"
    "    @classmethod\n"
    "    def open(cls, path: str, *, clock: ManualClock"
    ") -> AbstractAsyncContextManager[MyStore]:\n"
    "        return nullcontext(cls(clock=clock))\n")}
"""What a marked snippet needs, written as the embedder's module over a package store."""


@attrs.frozen
class Snippet:
    page: str
    line: int
    code: str
    needs: str | None

    @property
    def label(self) -> str:
        return f"{self.page}:{self.line}"


def snippets() -> list[Snippet]:
    found = []
    for page in PAGES:
        text = (ROOT / page).read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start(2))
            found.append(Snippet(page, line, match.group(2), match.group(1)))
    return found


SNIPPETS = snippets()


def env() -> dict[str, str]:
    paths = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))}


def write_shim(where: Path, module: str) -> None:
    assert module in SHIMS, f"no shim for {module}: add one or make the snippet standalone"
    *packages, name = module.split(".")
    folder = where.joinpath(*packages)
    folder.mkdir(parents=True, exist_ok=True)
    for depth in range(1, len(packages) + 1):
        (where.joinpath(*packages[:depth]) / "__init__.py").touch()
    (folder / f"{name}.py").write_text(SHIMS[module])


def test_the_pages_have_snippets() -> None:
    assert {s.page for s in SNIPPETS} == set(PAGES)


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda s: s.label)
def test_each_snippet_runs_as_written(snippet: Snippet, tmp_path: Path) -> None:
    source = tmp_path / "snippet.py"
    source.write_text(snippet.code)
    if snippet.needs is None:
        command = [sys.executable, str(source)]
    else:  # a test module (the store suite): collected and one check run
        write_shim(tmp_path, snippet.needs)
        source = source.rename(tmp_path / "test_snippet.py")
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "-o", "asyncio_mode=strict", "--rootdir", str(tmp_path),
                   "-k", "test_a_commit_keeps_committed_seq_and_history_chars", str(source)]
    result = subprocess.run(command, cwd=tmp_path, env={**env(), "PYTHONPATH": os.pathsep.join(
        [str(tmp_path), env()["PYTHONPATH"]])}, capture_output=True, text=True, timeout=120,
        check=False)
    assert result.returncode == 0, snippet.label + "\n" + result.stdout + result.stderr


def test_the_snippets_and_examples_type_check_strictly(tmp_path: Path) -> None:
    """What an embedder copies passes their own ``mypy --strict`` (a marked snippet with
    its shim)."""
    pytest.importorskip("mypy")
    files = [str(p) for p in sorted((ROOT / "examples").glob("*.py"))]
    for index, snippet in enumerate(SNIPPETS):
        if snippet.needs is not None:
            write_shim(tmp_path, snippet.needs)
        path = tmp_path / f"snippet_{index}.py"
        path.write_text(f"# {snippet.label}\n{snippet.code}")
        files.append(str(path))
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
         "--cache-dir", str(tmp_path / "cache"), *files],
        cwd=ROOT, env={**env(), "MYPYPATH": str(tmp_path)}, capture_output=True, text=True,
        timeout=600, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr


IMPORT = re.compile(r"from (turnstate[\w.]*) import ([\w, ]+)")
DOTTED = re.compile(r"`(turnstate(?:\.\w+)+)(?:\([^`]*\))?`")
SPAN_NAMES = {"turnstate.turn", "turnstate.cost_usd"}
"""Backticked names that are OpenTelemetry span and attribute names, not Python."""


def resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name)
        return found
    raise ImportError(dotted)


@pytest.mark.parametrize("page", PAGES)
def test_every_import_the_pages_show_works(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    missing = [f"{module}.{name}" for module, names in IMPORT.findall(text)
               for name in filter(None, names.replace(" ", "").split(","))
               if not hasattr(importlib.import_module(module), name)]
    for dotted in set(DOTTED.findall(text)) - SPAN_NAMES:
        try:
            resolve(dotted)
        except (ImportError, AttributeError):
            missing.append(dotted)
    assert missing == []


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:] if end < 0 else text[start:end]


def test_the_testing_section_names_what_turnstate_testing_exports() -> None:
    import turnstate.testing

    text = section((ROOT / "docs/api.md").read_text(), "## Testing")
    named = set(re.findall(r"^\* `(\w+)`", text, re.M)) | set(
        re.findall(r"`(\w+)`", text.split("re-exported from")[0].rsplit("\n* ", 1)[-1]))
    assert {"StoreConformance", "emulated_engine", "Reply"} <= named
    assert sorted(n for n in named if not hasattr(turnstate.testing, n)) == []


def test_the_store_section_names_are_where_it_says() -> None:
    """"Write your own store": the records in ``turnstate.storage``, the helpers it names
    in the modules it names."""
    import turnstate.core
    import turnstate.storage

    text = section((ROOT / "docs/api.md").read_text(), "## Write your own store")
    records = re.search(r"\(((?:`\w+`,\s)+`\w+`)\) are in `turnstate\.storage`", text)
    assert records is not None
    missing = [n for n in re.findall(r"`(\w+)`", records.group(1))
               if not hasattr(turnstate.storage, n)]
    helpers = r"from `(turnstate\.\w+)`: ((?:`\w+`(?:,\s|\sand\s)?)+)"
    for module, names in re.findall(helpers, text):
        missing += [f"{module}.{n}" for n in re.findall(r"`(\w+)`", names)
                    if not hasattr(importlib.import_module(module), n)]
    assert len(missing) == 0 and text.count("from `turnstate.") >= 2, missing
