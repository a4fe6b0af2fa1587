"""Diagrams of the turn machine, drawn from ``TRANSITIONS`` by ``transitions``' own
diagram support. Used by ``turnstate diagrams`` only: the runtime never imports this
module (``GraphMachine`` restyles its graph on every transition).

Three files are generated and committed under ``diagrams/``: ``turn.mmd`` (Mermaid
``stateDiagram-v2``, every edge labelled with its trigger and guards), ``turn.dot``
(Graphviz) and ``turn.svg`` (rendered by Graphviz's ``dot`` when it is installed).
A path diagram highlights the states and edges one recorded turn took.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from turnstate.core._errors import ConfigurationError
from turnstate.core._path import PathStep
from turnstate.states._machine import machine_config
from turnstate.states._table import INITIAL, TRANSITIONS, State

TITLE = "turnstate turn machine"
FILES = ("turn.mmd", "turn.dot", "turn.svg")


@attrs.frozen
class Rendered:
    """The diagram texts; ``svg`` is None when Graphviz's ``dot`` is not installed."""

    mermaid: str
    dot: str
    svg: str | None

    def files(self) -> dict[str, str]:
        out = {"turn.mmd": self.mermaid, "turn.dot": self.dot}
        if self.svg is not None:
            out["turn.svg"] = self.svg
        return out


class _Model:
    """A throw-away model for the throw-away diagram machine."""

    def __init__(self) -> None:
        self.state = INITIAL.value


def _graph(engine: Literal["mermaid", "graphviz"], title: str) -> Any:
    """The diagram backend's graph object (it has the styling API)."""
    try:
        from transitions.extensions import GraphMachine  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - part of transitions itself
        msg = f"transitions' diagram support is unavailable: {exc}"
        raise ConfigurationError(msg) from exc
    model = _Model()
    try:
        machine = GraphMachine(model=model, states=[s.value for s in State],
                     transitions=machine_config(TRANSITIONS), initial=INITIAL.value,
                     auto_transitions=False, show_conditions=True, graph_engine=engine,
                     title=title)
    except ImportError as exc:
        msg = ("Graphviz output needs the 'graphviz' Python package "
               "(pip install 'turnstate[diagrams]')")
        raise ConfigurationError(msg) from exc
    return machine.model_graphs[id(model)]


def _text(graph: Any, title: str) -> str:
    drawn = graph.get_graph(title)
    source = drawn.draw(None) if hasattr(drawn, "draw") and not hasattr(drawn, "source") \
        else drawn.source
    return str(source).rstrip() + "\n"


def render_svg(dot_source: str) -> str | None:
    """Render DOT to SVG with Graphviz's ``dot``; None when it is not installed."""
    executable = shutil.which("dot")
    if executable is None:
        return None
    result = subprocess.run([executable, "-Tsvg"], input=dot_source.encode("utf-8"),
                            capture_output=True, check=True)
    return result.stdout.decode("utf-8")


def render() -> Rendered:
    """The machine's diagrams, fresh from the table (no state highlighted)."""
    texts = []
    engines: tuple[Literal["mermaid", "graphviz"], ...] = ("mermaid", "graphviz")
    for engine in engines:
        graph = _graph(engine, TITLE)
        graph.set_node_style(INITIAL.value, "default")
        texts.append(_text(graph, TITLE))
    mermaid, dot = texts
    return Rendered(mermaid=mermaid, dot=dot, svg=render_svg(dot))


def render_path(path: Sequence[PathStep], *, title: str) -> Rendered:
    """The machine with ``path`` highlighted: visited states and the edges taken."""
    mermaid, dot = _graph("mermaid", title), _graph("graphviz", title)
    for graph in (mermaid, dot):
        graph.set_node_style(INITIAL.value, "default")
        for step in path:
            graph.set_previous_transition(step.source, step.dest)
        if path:
            graph.set_node_style(path[-1].dest, "active")
    steps = "\\n".join(f"{i}. {s.source} -{s.trigger}-> {s.dest}"
                       + (f" ({s.reason})" if s.reason and s.reason != s.trigger else "")
                       for i, s in enumerate(path, 1))
    mermaid_text = _text(mermaid, title)
    if path:
        mermaid_text += f"  note right of {path[-1].dest}: {steps}\n"
    dot_source = _text(dot, title)
    return Rendered(mermaid=mermaid_text, dot=dot_source, svg=render_svg(dot_source))


def write(rendered: Rendered, folder: Path, *, stem: str = "turn") -> list[Path]:
    """Write the rendered files into ``folder``; returns the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in rendered.files().items():
        target = folder / name.replace("turn", stem, 1)
        target.write_text(text, encoding="utf-8")
        written.append(target)
    return written


def stale(rendered: Rendered, folder: Path) -> list[str]:
    """Names of the committed files that differ from ``rendered`` (or are missing)."""
    out = []
    for name, text in rendered.files().items():
        target = folder / name
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            out.append(str(target))
    return out
