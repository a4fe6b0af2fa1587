"""The server's settings and its token file.

A token file has one ``owner: token`` line per token (``#`` starts a comment); several
tokens may map to one owner. ``serve`` without ``--tokens`` uses ``./turnstate-tokens``
and, when it does not exist, creates it with one random token for the owner ``local``.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from typing import TypedDict

import attrs

from turnstate.core._errors import ConfigurationError

DEFAULT_TOKENS_FILE = "turnstate-tokens"
LOCAL_OWNER = "local"
MIB = 1024 * 1024
DEFAULT_MAX_CHATS = 10_000
"""Chats per owner unless ``serve --max-chats-per-owner`` says otherwise."""


@attrs.frozen(kw_only=True)
class ServerConfig:
    """Limits and switches of the HTTP API.

    Attributes:
        max_body_bytes: the largest request body accepted (413 above it), but for a turn.
        max_content_bytes: the largest body of a turn (``POST /api/chats/{id}/turns``,
            ``POST /api/ui-messages``), whose image and PDF parts come as base64: the
            default holds the engine's 20 MiB of inline bytes (about 27 MiB of base64).
        max_text_chars: the longest user text or system prompt accepted (400 above it).
        heartbeat_seconds: how often an SSE stream sends a comment line while idle.
        cors_origin: the one origin allowed cross-origin access; None keeps CORS off.
        page_size: chats per page of ``GET /api/chats`` unless ``limit`` is given.
        emulated: the providers are the in-process emulators (enables the emulator
            controls under ``/api/emulator``).
        read_timeout_seconds: how long a connection may take to send a whole request's
            headers (also the idle keep-alive limit), and a body once its headers came.
            ``runner_options`` gives it to aiohttp as ``keepalive_timeout``: that timer
            starts with the connection and closes one that never completes its headers.
        allowed_hosts: when not empty, the only ``Host`` names (port stripped) that reach
            ``/healthz`` and ``/metrics`` (no token guards them: against DNS rebinding).
        cancel_on_disconnect: a turn whose starting client leaves is cancelled (the
            behaviour before detached turns); by default it runs on to its end.
        max_streams_per_owner: the streams (a turn's, a resume's, a UI stream's) one
            owner may have open at once on this node (429 ``too_many_streams`` above).
        max_turns_per_owner: the turns one owner may have running at once on this node,
            their clients gone or not (429 ``too_many_turns`` above).
        max_large_bodies_per_owner: the turns with a body larger than ``max_body_bytes``
            (inline images and files) one owner may have read or running at once on
            this node (429 ``too_many_large_bodies`` above, before the body is read).
        max_chats_per_owner: the chats one owner may keep, counted by the store (every
            node's alike; 409 ``too_many_chats`` when creating one more).
        shutdown_seconds: how long the application's shutdown may take to end the turns
            running here, write their ends and let their streams send them; past it,
            each turn whose end or events were not written is logged (one line) and
            given up (``serve`` sets it from ``--shutdown-grace``: ``ShutdownBudget``).
    """

    max_body_bytes: int = attrs.field(default=MIB, validator=attrs.validators.gt(0))
    max_content_bytes: int = attrs.field(default=28 * MIB, validator=attrs.validators.gt(0))
    max_text_chars: int = attrs.field(default=100_000, validator=attrs.validators.gt(0))
    heartbeat_seconds: float = attrs.field(default=10.0, validator=attrs.validators.gt(0))
    cors_origin: str | None = None
    page_size: int = attrs.field(default=20, validator=attrs.validators.gt(0))
    emulated: bool = True
    cancel_on_disconnect: bool = False
    read_timeout_seconds: float = attrs.field(default=15.0, validator=attrs.validators.gt(0))
    allowed_hosts: frozenset[str] = frozenset()
    max_streams_per_owner: int = attrs.field(default=64, validator=attrs.validators.gt(0))
    max_turns_per_owner: int = attrs.field(default=32, validator=attrs.validators.gt(0))
    max_large_bodies_per_owner: int = attrs.field(default=2, validator=attrs.validators.gt(0))
    max_chats_per_owner: int = attrs.field(default=DEFAULT_MAX_CHATS,
                                           validator=attrs.validators.gt(0))
    shutdown_seconds: float = attrs.field(default=17.5,  # serve's default grace's share
                                          validator=attrs.validators.gt(0))

    def runner_options(self) -> RunnerOptions:
        """Keyword arguments for aiohttp's ``AppRunner`` (or ``TestServer``)."""
        return {"keepalive_timeout": self.read_timeout_seconds}


class RunnerOptions(TypedDict):
    """What ``ServerConfig.runner_options`` sets on aiohttp's server."""

    keepalive_timeout: float


_COMMENT = re.compile(r"(?:^|(?<=\s))#")
"""Where a tokens file's comment starts: a ``#`` first on its line or after a space."""


def parse_tokens(text: str, source: str = "tokens") -> dict[str, str]:
    """``owner: token`` lines as token → owner. ``#`` starts a comment at the start of
    a line or after a space; inside a token it is part of the token (cutting the token
    there gave a shorter token than the operator wrote, silently).

    Raises:
        ConfigurationError: a line is not ``owner: token``, or a token repeats; the
            message names the line number, never the token.
    """
    tokens: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _COMMENT.split(raw, maxsplit=1)[0].strip()
        if not line:
            continue
        owner, sep, token = (piece.strip() for piece in line.partition(":"))
        if not sep or not owner or not token or any(c.isspace() for c in token):
            msg = f"{source}:{number}: expected 'owner: token'"
            raise ConfigurationError(msg)
        if token in tokens:
            msg = f"{source}:{number}: this token is already given to another line"
            raise ConfigurationError(msg)
        tokens[token] = owner
    if not tokens:
        msg = f"{source}: no tokens"
        raise ConfigurationError(msg)
    return tokens


MAX_TOKENS_FILE_BYTES = 16 * MIB
"""The longest tokens file read (some 300,000 tokens): ``--tokens /dev/zero``, or any
endless file, was read whole and grew the process until memory ran out."""


def load_tokens(path: Path) -> dict[str, str]:
    """The tokens file's tokens (``parse_tokens``), read up to ``MAX_TOKENS_FILE_BYTES``
    (a pipe to its end, within that).

    Raises:
        ConfigurationError: it cannot be read, is longer, is not UTF-8, or a line is
            not ``owner: token``.
    """
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_TOKENS_FILE_BYTES + 1)
    except OSError as exc:
        msg = f"cannot read the tokens file {path}: {exc.strerror or exc}"
        raise ConfigurationError(msg) from exc
    if len(raw) > MAX_TOKENS_FILE_BYTES:
        msg = (f"the tokens file {path} is longer than {MAX_TOKENS_FILE_BYTES:,} bytes: "
               "not a tokens file")
        raise ConfigurationError(msg)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = f"the tokens file {path} is not UTF-8 text (byte {exc.start})"
        raise ConfigurationError(msg) from None
    return parse_tokens(text, str(path))


def create_tokens_file(path: Path, owner: str = LOCAL_OWNER) -> str:
    """Write a new token file (mode 0600) with one random token; returns the token."""
    token = secrets.token_urlsafe(24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("# turnstate serve: one 'owner: token' per line\n")
        handle.write(f"{owner}: {token}\n")
    return token
