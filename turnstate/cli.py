"""The ``turnstate`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="turnstate",
        description="Continue multi-turn LLM chats across providers.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo = commands.add_parser("demo", help="run the scripted continuation demo")
    demo.add_argument("--json", action="store_true", help="print one JSON document")
    demo.add_argument("--db", metavar="PATH", help="SQLite file to use")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    args = _parser().parse_args(argv)
    if args.command == "demo":
        print("turnstate demo: the scripted demo is not built yet (see the open issues).")
        return 0
    return 2  # pragma: no cover - argparse rejects unknown commands first


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
