"""Decoding SSE frames: JSON objects, typed fields, and the frame dispatcher the
Responses and Interactions parsers share."""

from __future__ import annotations

import json
from collections.abc import Callable, Container, Mapping, Sequence
from typing import Any, ClassVar

from turnstate.core._errors import (
    ProviderProtocolError,
)
from turnstate.core._json import JsonObject
from turnstate.providers._protocol import ProviderEvent, SseEvent


def unhandled_name(event: SseEvent, handled: Container[str]) -> bool:
    """The frame names itself (``event:``) and the parser has nothing for that name.

    Every provider that names its frames names them by the type inside (the wire
    reference: OpenAI Responses, Anthropic, Gemini Interactions), so such a frame is
    skipped without decoding its JSON: a cursor turn's ``content_part`` frames, Anthropic's
    ``ping`` and ``content_block_stop``, Gemini's ``step.stop``. An unnamed frame (SSE's
    default ``message``) is still decoded and dispatched by its type field.
    """
    return event.event != "message" and event.event not in handled


_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""The C scanner under ``json.loads``: one call, no wrapper, no whitespace regex."""


def load_frame(provider: str, event: SseEvent) -> JsonObject:
    """Decode an event's JSON data as an object, or fail the turn cleanly.

    A frame that is one JSON value from its first character to its last (every frame a
    provider sends) is scanned by the C scanner directly; anything else (surrounding
    whitespace, a BOM, malformed text) goes through ``json.loads``, which accepts or
    refuses it exactly as before.
    """
    data = event.data
    try:
        frame, end = _scan(data, 0)
    except (StopIteration, ValueError):
        end = -1
    if end != len(data):
        return _load_slow(provider, event)
    if not isinstance(frame, dict):
        msg = f"frame in event {event.event!r} is not a JSON object"
        raise ProviderProtocolError(provider, msg)
    return frame


def _load_slow(provider: str, event: SseEvent) -> JsonObject:
    try:
        data = json.loads(event.data)
    except ValueError:
        msg = f"malformed frame in event {event.event!r}: {event.data[:80]!r}"
        raise ProviderProtocolError(provider, msg) from None
    if not isinstance(data, dict):
        msg = f"frame in event {event.event!r} is not a JSON object"
        raise ProviderProtocolError(provider, msg)
    return data


def is_done_marker(data: str) -> bool:
    """``[DONE]``, the sentinel OpenAI-style streams end with (surrounding whitespace
    allowed); a JSON frame is not copied to find out (``str.strip`` would)."""
    return "[DONE]" in data and data.strip() == "[DONE]"


def text_of(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def object_of(value: Any) -> JsonObject:
    """A JSON object field, ``{}`` when absent or not an object."""
    return value if isinstance(value, dict) else {}


def int_field(value: Any) -> int:
    """An integer field, 0 when absent or not an integer (``true`` is not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


FrameHandler = Callable[[Any, JsonObject], Sequence[ProviderEvent]]
"""A stream parser's handler of one frame type: (parser, frame) → events."""


class FrameDispatcher:
    """What the Responses and Interactions stream parsers share: each SSE frame decoded
    and handed to its ``HANDLERS`` entry by its type field (``[DONE]``, ``event: done``
    and unknown types ignored), done once the terminal frame is kept in ``_final``."""

    PROVIDER: ClassVar[str]
    TYPE_KEY: ClassVar[str]
    FINAL_EVENT: ClassVar[str]
    HANDLERS: ClassVar[Mapping[str, FrameHandler]]
    ID_ONLY: ClassVar[frozenset[str]] = frozenset()
    """Frame names whose handler only notes the response's id: once the id is known
    (``id_known``) they are skipped undecoded, like names without a handler."""
    _final: JsonObject | None = None
    _reads: frozenset[str] = frozenset()
    """The frame names decoded: ``HANDLERS``', less ``ID_ONLY`` once the id is known."""
    _reads_with_id: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def handle(cls, handlers: Mapping[str, FrameHandler]) -> None:
        """Set the class's ``HANDLERS`` (after its body, once its methods exist)."""
        cls.HANDLERS = handlers
        cls._reads = frozenset(handlers)
        cls._reads_with_id = cls._reads - cls.ID_ONLY

    def id_known(self) -> None:
        """The response's id is known: ``ID_ONLY`` frames carry nothing more."""
        self._reads = self._reads_with_id

    @property
    def done(self) -> bool:
        return self._final is not None

    def feed(self, event: SseEvent) -> Sequence[ProviderEvent]:
        name = event.event
        if name == "done" or (name != "message" and name not in self._reads):
            return ()  # named for nothing the parser reads: never decoded (unhandled_name)
        if is_done_marker(event.data):
            return ()
        frame = load_frame(self.PROVIDER, event)
        kind = frame.get(self.TYPE_KEY)
        handler = self.HANDLERS.get(kind if type(kind) is str and kind else name)
        return handler(self, frame) if handler is not None else ()

    def final_frame(self) -> JsonObject:
        """The terminal frame's object, or a protocol error when the stream stopped early."""
        if self._final is None:
            msg = f"the stream ended before {self.FINAL_EVENT}"
            raise ProviderProtocolError(self.PROVIDER, msg)
        return self._final

