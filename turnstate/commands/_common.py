"""What every command shares: the one-line error and argument checks."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Protocol

from turnstate.storage import is_dsn


class CliError(Exception):
    """A problem to report in one line with exit status 1."""


class Subparsers(Protocol):
    """The part of ``argparse``'s subparsers action a command uses."""

    def add_parser(self, name: str, *, help: str | None = ...) -> argparse.ArgumentParser: ...


class Command(Protocol):
    """What a command module provides."""

    def add_parser(self, commands: Subparsers) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def existing_db(target: str) -> str:
    """An SQLite file that exists, or a PostgreSQL DSN (checked when it is opened)."""
    if is_dsn(target):
        return target
    if not Path(target).is_file():
        msg = f"no database at {target}"
        raise CliError(msg)
    return target
