"""What every command shares: the one-line error and argument checks."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Protocol

from turnstate.core._text import first_lone_surrogate
from turnstate.storage import is_dsn


class CliError(Exception):
    """A problem to report in one line with exit status 1."""


class Subparsers(Protocol):
    """The part of ``argparse``'s subparsers action a command uses."""

    def add_parser(self, name: str, *, help: str | None = ...,
                   description: str | None = ...) -> argparse.ArgumentParser: ...


class Command(Protocol):
    """What a command module provides."""

    def add_parser(self, commands: Subparsers) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def port_number(raw: str) -> int:
    """An argparse type: a TCP port, 0 (a free one) to 65535; anything else is a usage
    error (exit 2) reported before the command creates anything."""
    try:
        port = int(raw)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        msg = f"{raw!r} is not a port (0 to 65535)"
        raise argparse.ArgumentTypeError(msg)
    return port


def existing_db(target: str) -> str:
    """An SQLite file that exists, or a PostgreSQL DSN (checked when it is opened)."""
    if is_dsn(target):
        return target
    if not Path(target).is_file():
        msg = f"no database at {target}"
        raise CliError(msg)
    return target


def record_id(raw: str, name: str) -> str:
    """A chat or turn id from the command line: bytes that are not UTF-8 arrive as lone
    surrogates (``os.fsdecode``), which no store holds or can even look up."""
    if first_lone_surrogate(raw) is not None:
        msg = f"{name} is not UTF-8 text: no chat or turn has such an id"
        raise CliError(msg)
    return raw
