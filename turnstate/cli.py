"""The ``turnstate`` command line: demo, diagrams, emulate, inspect.

This is the boundary where errors become text: a wrong command or argument prints
usage and exits 2; a missing database, an unknown chat or any other turnstate error is
one clear line and exit 1; no traceback reaches the user (set ``TURNSTATE_DEBUG=1`` to
see one).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from turnstate.engine._errors import TurnstateError


class CliError(Exception):
    """A problem to report in one line with exit status 1."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="turnstate",
        description="Continue multi-turn LLM chats across providers, one explicit "
                    "state machine per turn.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo = commands.add_parser("demo", help="run the scripted continuation demo (no keys, "
                                            "no network)")
    demo.add_argument("--json", action="store_true", help="print one JSON document")
    demo.add_argument("--db", metavar="PATH", help="SQLite file to use (default: a "
                                                   "temporary file)")
    diagrams = commands.add_parser("diagrams", help="write the machine's diagrams")
    diagrams.add_argument("--check", action="store_true",
                          help="exit 1 and name the files that differ from a fresh render")
    diagrams.add_argument("--out", metavar="DIR", default="diagrams", type=Path,
                          help="folder of the diagram files (default: diagrams)")
    diagrams.add_argument("--turn", nargs=2, metavar=("DB", "TURN_ID"),
                          help="draw the path one recorded turn took")
    emulate = commands.add_parser("emulate", help="serve one provider emulator until Ctrl-C")
    emulate.add_argument("provider", metavar="PROVIDER",
                         help="openai, gemini, openai-compatible, deepseek or anthropic")
    emulate.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    inspect = commands.add_parser("inspect", help="show a chat: row, envelope, last turns")
    inspect.add_argument("db", metavar="DB", help="SQLite database file")
    inspect.add_argument("chat_id", metavar="CHAT_ID")
    return parser


def _existing_db(path: str) -> Path:
    target = Path(path)
    if not target.is_file():
        msg = f"no database at {path}"
        raise CliError(msg)
    return target


def _diagrams(args: argparse.Namespace) -> int:
    from turnstate import diagrams  # noqa: PLC0415 - keep GraphMachine out of other commands

    if args.turn:
        from turnstate._inspect import turn_path  # noqa: PLC0415

        db, turn_id = args.turn
        record = asyncio.run(turn_path(_existing_db(db), turn_id))
        rendered = diagrams.render_path(record.path, title=f"turn {turn_id}")
        for written in diagrams.write(rendered, args.out, stem=f"turn-{turn_id}"):
            print(f"wrote {written}")
        print(" -> ".join([record.path[0].source, *(s.dest for s in record.path)])
              if record.path else "the turn recorded no path yet")
        return 0
    rendered = diagrams.render()
    if args.check:
        stale = diagrams.stale(rendered, args.out)
        if rendered.svg is None:
            print("Graphviz 'dot' is not installed: turn.svg was not checked")
        if stale:
            print("stale diagrams (run `turnstate diagrams`): " + ", ".join(stale))
            return 1
        print("diagrams are current")
        return 0
    for written in diagrams.write(rendered, args.out):
        print(f"wrote {written}")
    if rendered.svg is None:
        print("Graphviz 'dot' is not installed: SVG skipped")
    return 0


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "demo":
        from turnstate._demo import run_demo  # noqa: PLC0415

        return run_demo(json_output=args.json, db=args.db)
    if args.command == "diagrams":
        return _diagrams(args)
    if args.command == "emulate":
        from turnstate._emulate import serve_emulator  # noqa: PLC0415

        return serve_emulator(args.provider, port=args.port)
    from turnstate._inspect import inspect_chat  # noqa: PLC0415

    print(asyncio.run(inspect_chat(_existing_db(args.db), args.chat_id)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except (CliError, TurnstateError) as exc:
        print(f"turnstate {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if os.environ.get("TURNSTATE_DEBUG"):
            raise
        print(f"turnstate {args.command}: internal error: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
