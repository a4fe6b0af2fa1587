"""What every command shares: the one-line error and argument checks."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from turnstate.core._errors import ConfigurationError
from turnstate.core._text import first_lone_surrogate
from turnstate.storage import is_dsn
from turnstate.storage._dsn import dsn_problem
from turnstate.storage._open import check_store_target

_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
                     "\ud800-\udfff]")
"""What a report never writes to a terminal as it is: control characters but the line
break (C0, DEL, C1: ``ESC`` starts the sequences that retitle the window, clear the
screen or write the clipboard), bidi embeddings, overrides and isolates, lone
surrogates (no UTF-8 terminal can take them)."""


def terminal_text(text: str) -> str:
    """``text`` with each character of ``_UNSAFE`` written as its Python escape
    (``\\x1b``, ``\\u202e``): a report shows stored text that a provider, a gateway or
    a chat's user wrote (an error's message, a cursor), and a terminal would act on it."""
    return _UNSAFE.sub(lambda found: found.group().encode("unicode_escape",
                                                           "backslashreplace").decode(), text)


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


def web_origin(raw: str) -> str:
    """An argparse type: an origin as a browser sends it in ``Origin`` (``scheme://host``
    or ``scheme://host:port``, lower case, nothing after it). The server compares the
    header with it exactly, so ``http://localhost:3000/``, ``localhost:3000`` or ``*``
    never matched and CORS stayed silently off; each is a usage error (exit 2)."""
    try:
        parts = urlsplit(raw)
        port_ok = parts.port is not None or ":" not in parts.netloc.rpartition("]")[2]
    except ValueError:
        parts, port_ok = urlsplit(""), False
    if parts.scheme not in {"http", "https"} or not parts.hostname or not port_ok \
            or raw != f"{parts.scheme}://{parts.netloc}" or parts.username is not None \
            or parts.netloc != parts.netloc.lower():
        msg = (f"{raw!r} is not an origin: scheme://host[:port] in lower case, as a "
               "browser sends it (no path, no trailing '/')")
        raise argparse.ArgumentTypeError(msg)
    return raw


def store_target(raw: str) -> str:
    """An argparse type: an SQLite path or a PostgreSQL DSN; a URL naming no store, or a
    DSN that cannot be one (``dsn_problem``), is a usage error (exit 2) before the
    command creates anything, never quoting the DSN."""
    try:
        check_store_target(raw)
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    problem = dsn_problem(raw)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return raw


def existing_db(target: str) -> str:
    """An SQLite file that exists, or a PostgreSQL DSN (checked when it is opened). A URL
    that is neither is refused by its scheme alone: the rest may hold a password."""
    try:
        check_store_target(target)
    except ConfigurationError as exc:
        raise CliError(str(exc)) from None
    problem = dsn_problem(target)
    if problem is not None:
        raise CliError(problem)
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
