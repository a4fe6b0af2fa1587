"""What ``serve`` does around its sockets and files: its open-files limit raised, accept
failures logged once per interval, and an SQLite database created private (0600, like
the tokens file).

When the process runs out of file descriptors, asyncio's accept loop reports every
failed ``accept()`` (with a traceback) through the loop's exception handler, thousands
per second. ``AcceptFailures`` logs the first one of each interval and counts the rest.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import time
from collections.abc import Callable
from typing import Any

from turnstate.core._errors import ConfigurationError
from turnstate.storage import is_dsn
from turnstate.storage._open import check_store_target

_LOG = logging.getLogger("turnstate")
ACCEPT_LOG_INTERVAL_SECONDS = 10.0


class AcceptFailures:
    """A loop exception handler that rate-limits accept failures and passes the rest on."""

    def __init__(self, interval: float = ACCEPT_LOG_INTERVAL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._interval, self._clock = interval, clock
        self._last: float | None = None
        self.suppressed = 0

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        previous = loop.get_exception_handler()

        def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            if not self.handle(context):
                if previous is not None:
                    previous(loop, context)
                else:
                    loop.default_exception_handler(context)

        loop.set_exception_handler(handle)

    def handle(self, context: dict[str, Any]) -> bool:
        """True when ``context`` is an accept failure (logged or counted here)."""
        if not str(context.get("message", "")).startswith("socket.accept()"):
            return False
        now = self._clock()
        if self._last is not None and now - self._last < self._interval:
            self.suppressed += 1
            return True
        exc = context.get("exception")
        why = getattr(exc, "strerror", None) or exc or context.get("message")
        more = f" ({self.suppressed} more since the last report)" if self.suppressed else ""
        _LOG.error("cannot accept connections: %s%s; retrying", why, more)
        self._last, self.suppressed = now, 0
        return True


MAX_OPEN_FILES = 1 << 20
"""The most ``raise_open_files_limit`` asks for when the hard limit is unlimited."""


def raise_open_files_limit() -> int:
    """Raise this process's soft ``RLIMIT_NOFILE`` to its hard limit (at most
    ``MAX_OPEN_FILES``) and return the soft limit now in force.

    Every connection is a file descriptor, and no token is needed to open one and hold
    it for the read timeout: at the usual soft limit (1,024) a few hundred idle
    connections from one client made ``accept()`` fail for everyone. A process that only
    serves may take what the hard limit allows (Go's runtime does the same); a limit the
    kernel refuses (above ``fs.nr_open``) leaves it as it was."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = MAX_OPEN_FILES if hard == resource.RLIM_INFINITY else min(hard, MAX_OPEN_FILES)
    if wanted <= soft:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    except (OSError, ValueError):
        return soft
    return wanted


def private_sqlite_file(db: str) -> None:
    """Create a missing SQLite database file with mode 0600 before the store opens it
    (SQLite then creates its journal files with the same mode). A URL that names no
    store is refused first (``check_store_target``), never created as a file."""
    check_store_target(db)
    if is_dsn(db) or db == ":memory:" or os.path.exists(db):
        return
    try:
        os.close(os.open(db, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    except OSError as exc:  # its folder is missing or not writable: not a bind failure
        msg = f"cannot create the database file {db}: {exc.strerror or exc}"
        raise ConfigurationError(msg) from None
