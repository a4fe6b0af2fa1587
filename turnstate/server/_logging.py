"""``serve``'s logging: one line per event on stderr, scrubbed, as text or JSON.

The library itself only installs a ``NullHandler``; ``serve --log-level LEVEL
--log-format text|json`` adds one handler to the root logger (so aiohttp's and asyncio's
records come through too) with the ``ScrubbingFilter``, which scrubs every record that
reaches it. A record may carry ``turn_id`` and ``chat_id`` (``extra=``); both formats
show them. The JSON format writes one object per line::

    {"time": "2026-12-03T09:30:00.123Z", "level": "ERROR", "logger": "turnstate",
     "message": "request POST /api/chats/C/turns failed", "chat_id": "C",
     "error": "Traceback (most recent call last): ..."}
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TextIO

from turnstate.providers._scrub import ScrubbingFilter

LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")
CONTEXT_FIELDS = ("turn_id", "chat_id", "owner", "outcome", "reason")
"""Record attributes (set through ``extra=``) both formats show when present."""


def _context(record: logging.LogRecord) -> dict[str, str]:
    return {name: str(value) for name in CONTEXT_FIELDS
            if (value := getattr(record, name, None)) is not None}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (a traceback goes in ``error``)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": datetime.fromtimestamp(record.created, UTC).isoformat(
                     timespec="milliseconds").replace("+00:00", "Z"),
                 "level": record.levelname, "logger": record.name,
                 "message": record.getMessage(), **_context(record)}
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["error"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message key=value ...`` (a traceback follows on its lines)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        fields = " ".join(f"{k}={v}" for k, v in _context(record).items())
        line = super().formatMessage(record)
        return f"{line} {fields}" if fields else line


@contextmanager
def server_logging(level: str, fmt: str, stream: TextIO) -> Iterator[logging.Handler]:
    """Log to ``stream`` while the server runs; the handler is removed afterwards."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(ScrubbingFilter())
    root = logging.root  # the handler sees aiohttp and asyncio records too
    previous = root.level
    root.addHandler(handler)
    root.setLevel(level.upper())
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)
