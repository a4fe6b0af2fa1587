"""``serve``'s logging: one line per event on stderr, scrubbed, as text or JSON.

The library itself only installs a ``NullHandler``; ``serve --log-level LEVEL
--log-format text|json`` adds one handler to the root logger (so aiohttp's and asyncio's
records come through too) with the ``ScrubbingFilter``, which scrubs every record that
reaches it. A record may carry ``turn_id`` and ``chat_id`` (``extra=``); both formats
show them. The JSON format writes one object per line::

    {"time": "2026-12-03T09:30:00.123Z", "level": "ERROR", "logger": "turnstate",
     "message": "request POST /api/chats/C/turns failed", "chat_id": "C",
     "error": "Traceback (most recent call last): ..."}

A record's message and fields may hold what a client sent (a request's decoded path, a
chat id): the text format writes their control characters escaped (``one_line``), so a
``%0A`` in a URL cannot start a forged line; the JSON format writes them, and the
bidirectional controls, as ``\\uNNNN`` escapes (``json_line``). A request that
aiohttp's HTTP parser refuses is the client's mistake, not the server's (a body that
does not decode as its ``Content-Encoding`` says among them): ``MalformedRequests``
turns aiohttp's ERROR record with a traceback into one DEBUG line (unauthenticated
clients could otherwise write a traceback per request into the log).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TextIO

from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

from turnstate.providers._scrub import ScrubbingFilter

LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")
CONTEXT_FIELDS = ("turn_id", "chat_id", "owner", "outcome", "reason")
"""Record attributes (set through ``extra=``) both formats show when present."""


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029"
                      "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
"""Control characters (line breaks among them), and the bidirectional marks, embeddings,
overrides and isolates (and the BOM) that make a terminal show the rest of a line
reordered: a path with U+202E could make its line read as another."""
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def one_line(text: str) -> str:
    """``text`` with its ``_CONTROL`` characters escaped."""
    return _CONTROL.sub(lambda m: _ESCAPES.get(m.group()) or
                        (f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                         else f"\\u{ord(m.group()):04x}"), text)


class MalformedRequests(logging.Filter):
    """aiohttp's record of a request its HTTP parser refused (too many or too long
    headers, a bad request line, broken chunked encoding): ERROR with a traceback,
    written for any client that sends one. Here one DEBUG line (as aiohttp itself logs
    a first request's unknown method), dropped unless the server logs at debug."""

    def __init__(self, level: str) -> None:
        super().__init__()
        self._shown = logging.getLevelName(level.upper()) <= logging.DEBUG

    def filter(self, record: logging.LogRecord) -> bool:
        exc = _refusal(record.exc_info[1] if record.exc_info else None)
        if record.name != "aiohttp.server" or exc is None:
            return True
        if not self._shown:
            return False
        record.msg, record.args = "%s refused: %s", (record.getMessage(), exc.message)
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        record.exc_info = record.exc_text = None
        return True


def _refusal(exc: BaseException | None) -> HttpProcessingError | None:
    """The parser's refusal a record's exception is or wraps: a body that is not what its
    ``Content-Encoding`` says, read by aiohttp after a handler that left it unread (a
    401, a route without a body), is a ``RequestPayloadError`` whose cause is the
    parser's ``ContentEncodingError``."""
    if isinstance(exc, RequestPayloadError):
        exc = exc.__cause__
    return exc if isinstance(exc, HttpProcessingError) else None


def json_line(entry: dict[str, str]) -> str:
    """``entry`` as one line of JSON with every ``_CONTROL`` character written as its
    ``\\uNNNN`` escape: ``json.dumps`` escapes C0 only, and a JSON log viewer shows a
    string's bidirectional overrides and isolates as they act (a chat id or path with
    U+202E would reorder what the operator reads). A JSON reader decodes the same text."""
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}",
                        json.dumps(entry, ensure_ascii=False))


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
        return json_line(entry)


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message key=value ...`` (a traceback follows on its lines)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        """The first line: the message and fields with control characters escaped (each
        ``Formatter.format`` sets ``record.message`` anew, so no other handler sees it)."""
        fields = " ".join(f"{k}={one_line(v)}" for k, v in _context(record).items())
        record.message = one_line(record.message)
        line = super().formatMessage(record)
        return f"{line} {fields}" if fields else line


@contextmanager
def server_logging(level: str, fmt: str, stream: TextIO) -> Iterator[logging.Handler]:
    """Log to ``stream`` while the server runs; the handler is removed afterwards."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(MalformedRequests(level))  # before the scrubbing: its text is scrubbed
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
