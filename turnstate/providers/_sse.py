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

from turnstate.providers._protocol import SseEvent


class SseDecoder:
    """Feed bytes, get complete ``SseEvent`` values; sans-IO."""

    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._first = True
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self.last_event_id: str | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """Decode ``chunk`` and return the events it completed."""
        text = self._pending + self._text.decode(chunk)
        if self._first and text:
            text = text.removeprefix("\ufeff")
            self._first = False
        events: list[SseEvent] = []
        if "\r" not in text:
            # The common case (every provider ends lines with LF): split in C.
            lines = text.split("\n")
            self._pending = lines.pop()
            for line in lines:
                self._line(line, events)
            return events
        start = 0
        length = len(text)
        while True:
            end = _line_end(text, start)
            if end < 0:
                break
            if text[end] == "\r" and end + 1 == length:
                break  # a CR at the chunk's end: wait to see whether LF follows
            self._line(text[start:end], events)
            start = end + (2 if text.startswith("\r\n", end) else 1)
        self._pending = text[start:]
        return events

    def close(self) -> list[SseEvent]:
        """End of stream: a pending CR ends its line. An unterminated event is dropped."""
        events: list[SseEvent] = []
        if self._pending.endswith("\r"):
            self._line(self._pending[:-1], events)
            self._pending = ""
        return events

    def _line(self, line: str, events: list[SseEvent]) -> None:
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
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isdigit():
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
        self._event = ""
        self._retry = None


def _line_end(text: str, start: int) -> int:
    """Index of the first CR or LF at or after ``start``, or -1."""
    lf = text.find("\n", start)
    cr = text.find("\r", start, lf if lf >= 0 else len(text))
    if cr >= 0:
        return cr
    return lf
