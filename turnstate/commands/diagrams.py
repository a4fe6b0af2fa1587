"""``turnstate diagrams``: write the machine's diagrams, check them, or draw one turn."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from turnstate.commands._common import Subparsers, existing_db


def add_parser(commands: Subparsers) -> None:
    diagrams = commands.add_parser("diagrams", help="write the machine's diagrams")
    diagrams.add_argument("--check", action="store_true",
                          help="exit 1 and name the files that differ from a fresh render")
    diagrams.add_argument("--out", metavar="DIR", default="diagrams", type=Path,
                          help="folder of the diagram files (default: diagrams)")
    diagrams.add_argument("--turn", nargs=2, metavar=("DB", "TURN_ID"),
                          help="draw the path one recorded turn took")


def run(args: argparse.Namespace) -> int:
    if args.turn:
        return _draw_turn(args.turn[0], args.turn[1], args.out)
    return _check(args.out) if args.check else _write(args.out)


def _draw_turn(db: str, turn_id: str, out: Path) -> int:
    from turnstate import diagrams  # noqa: PLC0415 - keep GraphMachine out of other commands
    from turnstate.commands.inspect import turn_path  # noqa: PLC0415

    record = asyncio.run(turn_path(existing_db(db), turn_id))
    rendered = diagrams.render_path(record.path, title=f"turn {turn_id}")
    for written in diagrams.write(rendered, out, stem=f"turn-{turn_id}"):
        print(f"wrote {written}")
    print(" -> ".join([record.path[0].source, *(s.dest for s in record.path)])
          if record.path else "the turn recorded no path yet")
    return 0


def _check(out: Path) -> int:
    from turnstate import diagrams  # noqa: PLC0415

    rendered = diagrams.render()
    stale = diagrams.stale(rendered, out)
    if rendered.svg is None:
        print("Graphviz 'dot' is not installed: turn.svg was not checked")
    if stale:
        print("stale diagrams (run `turnstate diagrams`): " + ", ".join(stale))
        return 1
    print("diagrams are current")
    return 0


def _write(out: Path) -> int:
    from turnstate import diagrams  # noqa: PLC0415

    rendered = diagrams.render()
    for written in diagrams.write(rendered, out):
        print(f"wrote {written}")
    if rendered.svg is None:
        print("Graphviz 'dot' is not installed: SVG skipped")
    return 0
