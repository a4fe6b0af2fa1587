"""The package is built in one-way layers, and no two files import each other in a ring.

core < states < {providers, storage} < {engine, emulators} < top (server, commands, cli,
diagrams and the package's own ``__init__``). A module may import from its own layer or a
lower one; siblings never import each other: providers and storage, and engine and
emulators (so production code, providers included, cannot reach an emulator). Imports are read from
each file's syntax tree (lazy imports inside functions count too), and every subpackage
is also imported first in a fresh interpreter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

import turnstate

PACKAGE_ROOT = Path(turnstate.__file__).parent
LAYERS: Mapping[str, int] = {
    "core": 0, "states": 1, "providers": 2, "storage": 2, "engine": 3, "emulators": 3,
}
TOP = 4


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE_ROOT.rglob("*.py"))}


def layer_of(module: str) -> tuple[int, str]:
    """(layer, group): the group tells siblings of one layer apart."""
    parts = module.split(".")
    group = parts[1] if len(parts) > 1 else ""
    return LAYERS.get(group, TOP), group


def _resolve(base: str, name: str, modules: Mapping[str, Path]) -> str:
    """``from base import name`` names the module ``base.name`` when it is one."""
    candidate = f"{base}.{name}"
    return candidate if candidate in modules else base


def imports_of(module: str, source: str, modules: Mapping[str, Path]) -> Iterator[str]:
    """Every turnstate module that ``source`` (the text of ``module``) imports."""
    package = module if module in modules and _is_package(module, modules) \
        else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.split(".")[0] == "turnstate")
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            if base.split(".")[0] != "turnstate":
                continue
            for alias in node.names:
                yield _resolve(base, alias.name, modules)


def _is_package(module: str, modules: Mapping[str, Path]) -> bool:
    return modules[module].name == "__init__.py"


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def layer_violations(module: str, targets: Iterator[str] | list[str]) -> list[str]:
    """Imports of ``module`` that reach up a layer or across to a sibling."""
    own_layer, own_group = layer_of(module)
    found = []
    for target in targets:
        layer, group = layer_of(target)
        upward = layer > own_layer
        sideways = layer == own_layer and group != own_group and layer != TOP
        if upward or sideways:
            found.append(f"{module} imports {target}")
    return found


def import_graph() -> dict[str, set[str]]:
    modules = all_modules()
    return {name: set(imports_of(name, path.read_text(), modules)) - {name}
            for name, path in modules.items()}


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_from_a_layer_above_or_beside_it() -> None:
    problems = [v for module, targets in import_graph().items()
                for v in layer_violations(module, sorted(targets))]
    assert problems == []


def test_no_import_cycles_between_files() -> None:
    assert cycles(import_graph()) == []


def test_the_core_imports_nothing_else_of_turnstate() -> None:
    graph = import_graph()
    core = {m for m in graph if layer_of(m)[1] == "core"}
    assert core, "turnstate.core has no modules"
    assert {t for m in core for t in graph[m]} <= core


@pytest.mark.parametrize(
    ("module", "target"),
    [
        ("turnstate.core._envelope", "turnstate.engine._driver"),
        ("turnstate.core._errors", "turnstate.states._table"),
        ("turnstate.states._machine", "turnstate.storage._protocol"),
        ("turnstate.providers._sse", "turnstate.storage._sqlite"),
        ("turnstate.storage._memory", "turnstate.providers._protocol"),
        ("turnstate.engine._run", "turnstate.server"),
        ("turnstate.storage._sqlite", "turnstate.commands._common"),
        ("turnstate.providers._requests", "turnstate.emulators._base"),
        ("turnstate.providers.anthropic._codec", "turnstate.emulators"),
        ("turnstate.engine._driver", "turnstate.emulators._scripted"),
        ("turnstate.emulators._emulated", "turnstate.engine"),
    ],
)
def test_a_planted_upward_or_sideways_import_is_caught(module: str, target: str) -> None:
    source = f"from __future__ import annotations\n\ndef f() -> None:\n    import {target}\n"
    targets = list(imports_of(module, source, all_modules()))
    assert targets == [target]
    assert layer_violations(module, targets) == [f"{module} imports {target}"]


def test_a_planted_cycle_is_caught() -> None:
    graph = import_graph()
    graph["turnstate.core._json"] = graph["turnstate.core._json"] | {"turnstate.core._envelope"}
    assert any({"turnstate.core._envelope", "turnstate.core._json"} <= set(c)
               for c in cycles(graph))


def test_relative_imports_are_resolved() -> None:
    modules = all_modules()
    source = "from . import _json\nfrom ._errors import EnvelopeMalformed\n"
    assert set(imports_of("turnstate.core._envelope", source, modules)) == {
        "turnstate.core._json", "turnstate.core._errors"}


SUBPACKAGES = sorted({".".join(m.split(".")[:2]) for m in all_modules()})


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_every_module_of_a_subpackage_imports_first_in_a_fresh_interpreter(
    package: str,
) -> None:
    names = [m for m in all_modules() if m == package or m.startswith(package + ".")]
    code = f"import importlib\nfor name in {names!r}:\n    importlib.import_module(name)\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
