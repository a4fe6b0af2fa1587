"""An incremental server-sent-events decoder following the WHATWG rules.

Bytes arrive in arbitrary network chunks; ``SseDecoder.feed`` returns the events that
became complete. Lines end in LF, CRLF or a lone CR (a CR at the end of a chunk waits
for the next chunk to know whether an LF follows). ``data`` lines accumulate with
newlines between them; ``event``, ``id`` and ``retry`` are honoured; lines starting with
``:`` are comments; unknown fields are ignored; a blank line dispatches. An event with
no data is not dispatched, as the standard says.
"""

from __future__ import annotations

import codecs
from typing import Any

from turnstate.core._frozen import _builder
from turnstate.providers._protocol import SseEvent

_new = object.__new__
_utf8_decode = codecs.utf_8_decode
_Building = _builder(SseEvent)
"""A frame is made as ``core._frozen``'s slot makers make a record: its slots stored
while it is of this subclass of ``SseEvent`` (plain attribute stores the interpreter
specialises), then made an ``SseEvent``; the slot descriptors' ``__set__``, a call each,
cost about a fifth more (issue 26: one per frame)."""


class SseLimitExceeded(Exception):
    """A line or an event grew past the decoder's limit (``limit`` names which)."""

    def __init__(self, limit: str, size: int) -> None:
        super().__init__(f"{limit}: more than {size} characters")
        self.limit = limit
        self.size = size


LINE_LIMIT, EVENT_LIMIT = "max_line_bytes", "max_event_bytes"

DEFAULT_MAX_LINE = 4 << 20
"""The longest line, and the largest event's data, the decoder holds (characters)."""


class SseDecoder:
    """Feed bytes, get complete ``SseEvent`` values; sans-IO.

    Linear in the bytes fed: each chunk is scanned once, and an unfinished line is kept
    as pieces joined only when it ends. A line or an event's data longer than
    ``max_line`` characters raises ``SseLimitExceeded`` instead of growing.
    """

    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        self._undecoded = b""  # the start of a character split between chunks
        self._pending: list[str] = []
        self._pending_size = 0
        self._skip_lf = False
        self._first = True
        self._data: list[str] = []
        self._data_size = 0
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self.max_line = max_line
        self.last_event_id: str | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """Decode ``chunk`` and return the events it completed.

        Raises:
            SseLimitExceeded: a line or an event outgrew ``max_line``.
        """
        # codecs' incremental UTF-8 decoder, without its Python frame and its copy of
        # every chunk (``buffer + input``): the same C decoder, the same result.
        if self._undecoded:
            chunk = self._undecoded + chunk
        text, used = _utf8_decode(chunk, "replace", False)
        # bytes, not a slice of ``chunk``: a memoryview's would hold the caller's buffer
        # and could not be added to the next chunk.
        self._undecoded = bytes(chunk[used:]) if used < len(chunk) else b""
        if self._first and text:
            text = text.removeprefix("\ufeff")
            self._first = False
        if self._skip_lf and text:
            self._skip_lf = False
            text = text.removeprefix("\n")  # the LF of a CRLF split between chunks
        events: list[SseEvent] = []
        if "\r" not in text:
            return self._feed_lf(text, events)
        start = 0
        while True:
            end = _line_end(text, start)
            if end < 0:
                break
            self._end_line(text[start:end], events)
            if text[end] == "\r" and end + 1 == len(text):
                self._skip_lf = True  # a CR at the chunk's end: an LF may follow next
                start = end + 1
                break
            start = end + (2 if text.startswith("\r\n", end) else 1)
        if start < len(text):
            self._pending.append(text[start:])
            self._pending_size += len(text) - start
            if self._pending_size > self.max_line:
                raise SseLimitExceeded(LINE_LIMIT, self.max_line)
        return events

    def _feed_lf(self, text: str, events: list[SseEvent]) -> list[SseEvent]:
        """``feed`` for text without a CR (every provider ends lines with LF).

        The whole events of the text (the blocks before its last blank line) are cut in
        C on ``"\n\n"`` and go through ``_blocks``; only a chunk's start, when the
        previous chunk ended mid-event, and its unfinished end take the line parser.
        """
        start = 0
        if self._pending or self._data or self._event or self._retry is not None:
            end = text.find("\n\n")  # the first blank line: the event in progress ends
            if end < 0:
                return self._lines(text, events)
            start = end + 2
            self._lines(text[:start], events)
        blocks = (text[start:] if start else text).split("\n\n")
        tail = blocks.pop()  # after the last blank line: lines of an unfinished event
        if blocks:
            self._blocks(blocks, events)
        if tail:
            self._lines(tail, events)
        return events

    def _blocks(self, blocks: list[str], events: list[SseEvent]) -> None:
        """Whole events, at an event boundary: each block followed by a blank line.

        The fast path decodes the block shapes every provider sends (``data: X`` and
        ``event: E`` + ``data: X``, each field on one line) by string slicing: the usual
        ``event: E\ndata: X`` cut once on ``"\ndata: "`` (one partition, not three and
        their copies of the data: a third of the decoding, issue 26); any other
        block (comments, ``id``/``retry``, multi-line data, extra blank lines, a block
        past the line limit) goes through the line parser, which ``_lines`` of the
        blocks joined by blank lines would have used for all of them, with the same
        result.
        """
        limit = self.max_line
        if self._id is not None:  # every block ends in a dispatch, which sets it
            self.last_event_id = self._id
        last_id = self.last_event_id
        append = events.append
        for block in blocks:
            # Cut by ``partition`` and compared by slices: ``str.startswith`` and
            # ``str.find`` with a start parse their arguments as a tuple, ~6 a block.
            if block[:7] == "event: " and len(block) <= limit:  # the usual shape, cut once
                head, newline, data = block.partition("\ndata: ")
                if newline and "\n" not in data and "\n" not in head:
                    event: Any = _new(_Building)
                    event.data = data
                    event.event = head[7:] or "message"
                    event.id = last_id
                    event.retry = None
                    event.__class__ = SseEvent
                    append(event)
                    continue
            field = ""
            if len(block) <= limit:
                first, newline, rest = block.partition("\n")
                if not newline:  # one line: ``data: X``?
                    field, colon, data = first.partition(":")
                    name = "message"
                elif "\n" not in rest:  # two lines: ``event: E`` + ``data: X``?
                    field, colon, name = first.partition(":")
                    if field == "event" and colon:
                        name = (name[1:] if name[:1] == " " else name) or "message"
                        field, colon, data = rest.partition(":")
                    else:
                        field = ""
                if field == "data" and colon:
                    event = _new(_Building)  # sse_event(...), inlined: one per frame
                    event.data = data[1:] if data[:1] == " " else data
                    event.event = name
                    event.id = last_id
                    event.retry = None
                    event.__class__ = SseEvent
                    append(event)
                    continue
            for line in block.split("\n"):
                self._line(line, events)
            self._line("", events)
            last_id = self.last_event_id  # an id line may have changed it

    def _lines(self, text: str, events: list[SseEvent]) -> list[SseEvent]:
        """LF-ended lines, one at a time (the lines are split in C)."""
        lines = text.split("\n")
        tail = lines.pop()
        if lines:
            self._end_line(lines[0], events)  # completes the pending pieces, if any
            for line in lines[1:]:
                self._line(line, events)
        if tail:
            self._pending.append(tail)
            self._pending_size += len(tail)
            if self._pending_size > self.max_line:
                raise SseLimitExceeded(LINE_LIMIT, self.max_line)
        return events

    def close(self) -> list[SseEvent]:
        """End of stream: an unterminated line or event is dropped, as the standard says."""
        self._pending, self._pending_size = [], 0
        return []

    def _end_line(self, tail: str, events: list[SseEvent]) -> None:
        if self._pending:
            line = "".join(self._pending) + tail
            self._pending, self._pending_size = [], 0
        else:
            line = tail
        self._line(line, events)

    def _line(self, line: str, events: list[SseEvent]) -> None:
        if len(line) > self.max_line:  # a whole line inside one chunk is held to it too
            raise SseLimitExceeded(LINE_LIMIT, self.max_line)
        if not line:
            self._dispatch(events)
            return
        if line.startswith(":"):
            return
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._data_size += len(value) + 1
            if self._data_size > self.max_line:
                raise SseLimitExceeded(EVENT_LIMIT, self.max_line)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and _is_retry(value):
            self._retry = int(value)

    def _dispatch(self, events: list[SseEvent]) -> None:
        if self._id is not None:
            self.last_event_id = self._id
        if self._data:
            events.append(
                SseEvent(
                    data="\n".join(self._data),
                    event=self._event or "message",
                    id=self.last_event_id,
                    retry=self._retry,
                )
            )
        self._data = []
        self._data_size = 0
        self._event = ""
        self._retry = None


MAX_RETRY_DIGITS = 15
"""The longest ``retry:`` value read (milliseconds: 15 digits are 30,000 years)."""


def _is_retry(value: str) -> bool:
    """A ``retry:`` value the standard takes: ASCII digits only (``str.isdigit`` takes
    ``²`` and ``٣``, which ``int`` refuses), and at most ``MAX_RETRY_DIGITS`` of them
    (``int`` refuses more than 4,300); any other is ignored, as unknown fields are. Each
    raised ``ValueError`` out of the decoder, and an upstream's turn aborted on it."""
    return value.isascii() and value.isdigit() and len(value) <= MAX_RETRY_DIGITS


def _line_end(text: str, start: int) -> int:
    """Index of the first CR or LF at or after ``start``, or -1."""
    lf = text.find("\n", start)
    cr = text.find("\r", start, lf if lf >= 0 else len(text))
    if cr >= 0:
        return cr
    return lf
