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


def load_frame(provider: str, event: SseEvent) -> JsonObject:
    """Decode an event's JSON data as an object, or fail the turn cleanly."""
    try:
        data = json.loads(event.data)
    except ValueError:
        msg = f"malformed frame in event {event.event!r}: {event.data[:80]!r}"
        raise ProviderProtocolError(provider, msg) from None
    if not isinstance(data, dict):
        msg = f"frame in event {event.event!r} is not a JSON object"
        raise ProviderProtocolError(provider, msg)
    return data



def text_of(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def object_of(value: Any) -> JsonObject:
    """A JSON object field, ``{}`` when absent or not an object."""
    return value if isinstance(value, dict) else {}


def int_field(value: Any) -> int:
    """An integer field, 0 when absent or not an integer (``true`` is not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0



"""A stream parser's handler of one frame type: (parser, frame) → events."""


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
    _final: JsonObject | None = None

    @property
    def done(self) -> bool:
        return self._final is not None

    def feed(self, event: SseEvent) -> Sequence[ProviderEvent]:
        if event.event == "done" or event.data.strip() == "[DONE]":
            return ()
        if unhandled_name(event, self.HANDLERS):
            return ()
        frame = load_frame(self.PROVIDER, event)
        return self._dispatch(text_of(frame.get(self.TYPE_KEY)) or event.event, frame)

    def _dispatch(self, kind: str, frame: JsonObject) -> Sequence[ProviderEvent]:
        handler = self.HANDLERS.get(kind)
        return handler(self, frame) if handler is not None else ()

    def final_frame(self) -> JsonObject:
        """The terminal frame's object, or a protocol error when the stream stopped early."""
        if self._final is None:
            msg = f"the stream ended before {self.FINAL_EVENT}"
            raise ProviderProtocolError(self.PROVIDER, msg)
        return self._final
