"""``turnstate diagrams``: write the machine's diagrams, check them, or draw one turn."""

from __future__ import annotations

import argparse
import asyncio
import re
from pathlib import Path

from turnstate.commands._common import CliError, Subparsers, existing_db, record_id


def add_parser(commands: Subparsers) -> None:
    diagrams = commands.add_parser(
        "diagrams", help="write the machine's diagrams",
        description="Write the turn state machine's diagrams (Mermaid, Graphviz dot, SVG) "
                    "generated from its transition table, check that committed ones are "
                    "current, or draw the path one recorded turn took.")
    diagrams.add_argument("--check", action="store_true",
                          help="exit 1 and name the files that differ from a fresh render")
    diagrams.add_argument("--out", metavar="DIR", type=Path,
                          help="folder of the diagram files (default: diagrams; with "
                               "--turn: the current directory)")
    diagrams.add_argument("--turn", nargs=2, metavar=("DB", "TURN_ID"),
                          help="draw the path one recorded turn took (turn-ID.mmd, .dot, "
                               ".svg)")


def run(args: argparse.Namespace) -> int:
    out = args.out or (Path() if args.turn else Path("diagrams"))
    try:
        if args.turn:
            return _draw_turn(args.turn[0], args.turn[1], out)
        return _check(out) if args.check else _write(out)
    except OSError as exc:  # an unwritable or missing folder, a file in its place
        msg = f"cannot {'read' if args.check else 'write'} diagrams in {out}: " + (
            exc.strerror or str(exc)) + (f" ({exc.filename})" if exc.filename else "")
        raise CliError(msg) from None


def file_stem(turn_id: str) -> str:
    """The file name stem of one turn's diagrams: ``turn-<id>``, with anything but
    letters, digits, ``.``, ``_`` and ``-`` as ``_`` (a turn id is the embedder's
    string: a ``/`` in it named a folder that does not exist)."""
    return "turn-" + re.sub(r"[^A-Za-z0-9._-]", "_", turn_id)


def _draw_turn(db: str, turn_id: str, out: Path) -> int:
    from turnstate import diagrams  # noqa: PLC0415 - keep GraphMachine out of other commands
    from turnstate.commands.inspect import turn_path  # noqa: PLC0415

    record = asyncio.run(turn_path(existing_db(db), record_id(turn_id, "TURN_ID")))
    rendered = diagrams.render_path(record.path, title=f"turn {turn_id}")
    for written in diagrams.write(rendered, out, stem=file_stem(turn_id)):
        print(f"wrote {written}")
    print(" -> ".join([record.path[0].source, *(s.dest for s in record.path)])
          if record.path else "the turn recorded no path yet")
    return 0


def _check(out: Path) -> int:
    from turnstate import diagrams  # noqa: PLC0415

    rendered = diagrams.render()
    names = list(rendered.files())
    missing = [str(out / name) for name in names if not (out / name).is_file()]
    stale = [name for name in diagrams.stale(rendered, out) if name not in missing]
    if rendered.svg is None:
        print("Graphviz 'dot' is not installed: turn.svg was not checked")
    if len(missing) == len(names):
        print(f"no diagrams in {out} (outside a checkout? pass --out DIR): missing "
              + ", ".join(missing))
        return 1
    if missing:
        print("missing diagrams (run `turnstate diagrams`): " + ", ".join(missing))
    if stale:
        print("stale diagrams (run `turnstate diagrams`): " + ", ".join(stale))
    if missing or stale:
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
