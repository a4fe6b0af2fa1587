"""The ``turnstate`` command line: parse the arguments, dispatch to one command module.

This is the boundary where errors become text: a wrong command or argument prints
usage and exits 2; a missing database, an unknown chat or any other turnstate error is
one clear line and exit 1; no traceback reaches the user (set ``TURNSTATE_DEBUG=1`` to
see one). Each command lives in ``turnstate.commands.<name>`` and imports nothing from here.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence

from turnstate import __version__
from turnstate.commands import demo, diagrams, emulate, inspect, release, serve
from turnstate.commands._common import CliError, Command
from turnstate.core import TurnstateError

COMMANDS: Mapping[str, Command] = {
    "demo": demo, "diagrams": diagrams, "emulate": emulate, "inspect": inspect,
    "release": release, "serve": serve,
}


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(
        prog="turnstate",
        description="Continue multi-turn LLM chats across providers, one explicit "
                    "state machine per turn.",
    )
    parser.add_argument("--version", action="version", version=f"turnstate {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS.values():
        command.add_parser(commands)
    return parser, dict(commands.choices)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments; an unknown option is reported with the subcommand's own usage."""
    parser, subparsers = _parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        subparsers[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


EXIT_INTERRUPTED = 130
"""Ctrl-C (SIGINT) ended the command: the shell's status for a process SIGINT ended."""

EXIT_BROKEN_PIPE = 141
"""The reader of stdout went away (``turnstate demo | head``): exit quietly, as a
process the shell saw killed by SIGPIPE."""


def _quiet_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's final flush
    does not report the same error again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    args = _parse(argv)
    try:
        status = COMMANDS[args.command].run(args)
        sys.stdout.flush()  # a closed pipe shows here, not at the interpreter's exit
        return status
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except (CliError, TurnstateError) as exc:
        print(f"turnstate {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: what was running was cancelled and cleaned up
        print(f"turnstate {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if os.environ.get("TURNSTATE_DEBUG"):
            raise
        print(f"turnstate {args.command}: internal error: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
