"""Decoding SSE frames: JSON objects, typed fields, and the frame dispatcher the
Responses and Interactions parsers share."""

from __future__ import annotations

import json
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
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


def _no_constant(name: str) -> Any:
    """``NaN``, ``Infinity`` and ``-Infinity``, which Python's ``json`` reads and RFC 8259
    has no such values for: a frame holding one is malformed. Taken, a ``NaN`` reached
    parts and metadata that ``compact_json`` then refused with a bare ``ValueError``
    (the response, or the store, failed far from the frame)."""
    msg = f"{name} is not JSON"
    raise ValueError(msg)


_DECODER = json.JSONDecoder(parse_constant=_no_constant)
_scan: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
"""The C scanner under ``json.loads``: one call, no wrapper, no whitespace regex (strict:
``_no_constant``; called only when a frame holds such a constant, so it costs nothing)."""
scan_json = _scan
"""``_scan`` for a parser's inline delta path (``ResponsesStreamParser.feed_many``):
``(value, end)`` of the JSON value at a text's start; ``StopIteration`` or
``ValueError`` when there is none."""


def strict_json(text: str) -> Any:
    """``json.loads`` of ``text`` refusing ``NaN`` and the infinities (``_no_constant``):
    for JSON a provider streams in pieces (Anthropic's tool input).

    Raises:
        ValueError: not JSON.
    """
    return _DECODER.decode(text)


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
        data = _DECODER.decode(event.data)
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


def error_object(value: Any) -> JsonObject | None:
    """A frame's ``error`` value as an error object: the object itself, or a relay's
    text (``{"error": "upstream timed out"}``, as ``holds_error`` takes a body) as its
    ``message``; None for anything else (absent, null, empty)."""
    if type(value) is dict:
        return value
    return {"message": value} if type(value) is str and value else None


def object_of(value: Any) -> JsonObject:
    """A JSON object field, ``{}`` when absent or not an object."""
    return value if isinstance(value, dict) else {}


MAX_TOKEN_COUNT = 1_000_000_000
"""The largest token count a provider's usage field is read as: a hundred times the
largest context window offered (10 M tokens). A count past it is no count of a real
request (``10**30`` billed 10**24 dollars)."""


def int_field(value: Any) -> int:
    """A count field, 0 when absent or not a count: not an integer (``true`` is not a
    count), negative (a negative token count would make a negative cost) or past
    ``MAX_TOKEN_COUNT``."""
    return (value if isinstance(value, int) and not isinstance(value, bool)
            and 0 < value <= MAX_TOKEN_COUNT else 0)


FrameHandler = Callable[[Any, JsonObject], Sequence[ProviderEvent]]
"""A stream parser's handler of one frame type: (parser, frame) → events."""

FastHandler = Callable[[Any, JsonObject], Sequence[ProviderEvent] | None]
"""A parser's delta handler for the common case only (``FrameDispatcher.FAST``): the
events, or None, having changed nothing, to hand the frame to the full path."""


class FrameDispatcher:
    """What the Responses and Interactions stream parsers share: each SSE frame decoded
    and handed to its ``HANDLERS`` entry by its type field (``[DONE]``, ``event: done``
    and unknown types ignored), done once the terminal frame is kept (``finished``).

    A frame without a type goes by its ``event:`` name, except one holding an ``error``
    object, which is an error frame whatever its name: relays write a failure after
    HTTP 200 as Chat Completions' ``data: {"error": {...}}``, and the OpenAI SDK raises
    on any frame with an ``error`` key (providers-wire.md 1.5)."""

    PROVIDER: ClassVar[str]
    TYPE_KEY: ClassVar[str]
    FINAL_EVENT: ClassVar[str]
    HANDLERS: ClassVar[Mapping[str, FrameHandler]]
    KEPT: ClassVar[frozenset[str]] = frozenset()
    """Frame names that matter only as a fallback (the response's id, which the terminal
    frame names too): kept undecoded, and decoded, newest first, only when the fallback
    is needed (``kept_frames``). Not in ``HANDLERS``: an unnamed frame of the type is
    dispatched there as usual."""
    _final: JsonObject | None = None
    _kept: list[SseEvent] | None = None

    @classmethod
    def handle(cls, handlers: Mapping[str, FrameHandler]) -> None:
        """Set the class's ``HANDLERS`` (after its body, once its methods exist)."""
        cls.HANDLERS = handlers
        cls._reads = frozenset(handlers) - cls.KEPT

    _reads: ClassVar[frozenset[str]] = frozenset()
    """The frame names decoded as they come: ``HANDLERS``' less ``KEPT``."""

    FAST: ClassVar[Mapping[str, FastHandler]] = {}
    """The delta path (issue 26): handlers by ``event:`` name for the frames a stream is
    mostly made of (text deltas). Such a frame is scanned and, when it is one JSON
    object whose type field names it too, handed straight to its fast handler: no
    ``[DONE]`` check, no dispatch by type, no second lookup of the item. Anything else
    (another type, malformed JSON, surrounding whitespace, a delta the fast handler does
    not take whole: it returns None) goes the full path, which decides as it always
    did; tests/providers/test_frame_fast_path.py holds the two equal."""

    def kept_frames(self) -> Iterator[JsonObject]:
        """The ``KEPT`` frames, decoded now, newest first.

        Raises:
            ProviderProtocolError: a kept frame is malformed.
        """
        for event in reversed(self._kept or ()):
            yield load_frame(self.PROVIDER, event)

    done: bool = False
    """True once the terminal frame is kept (``finished``): a plain attribute, read
    after every frame."""

    def finished(self, final: JsonObject) -> None:
        """The terminal frame came: keep its object; the parser is ``done``."""
        self._final = final
        self.done = True

    def feed(self, event: SseEvent) -> Sequence[ProviderEvent]:
        name = event.event
        fast = self.FAST.get(name)
        if fast is not None:
            data = event.data
            try:
                frame, end = _scan(data, 0)
            except (StopIteration, ValueError):
                end = -1
            if end == len(data) and type(frame) is dict and frame.get(self.TYPE_KEY) == name:
                out = fast(self, frame)
                if out is not None:
                    return out
        return self._feed(event, name)

    def feed_many(self, batch: Sequence[SseEvent], out: list[ProviderEvent]) -> None:
        """``feed`` of each event of ``batch`` in order, its provider events appended to
        ``out``, until the parser is ``done`` (the frames after the terminal one are left
        unread, as ``provider_batches`` left them). A failure is raised as ``feed``
        raises it, the events of the frames before it already in ``out``.

        A network chunk's frames in one call (issue 26): ``provider_batches`` made one
        ``feed`` call per frame; a parser may take its commonest frames inline here
        (``ResponsesStreamParser``'s text deltas)."""
        feed = self.feed
        for event in batch:
            events = feed(event)
            if events:
                out.extend(events)
            if self.done:
                return

    def _feed(self, event: SseEvent, name: str) -> Sequence[ProviderEvent]:
        """The full path: every frame ``FAST`` does not take."""
        if name == "done" or (name != "message" and name not in self._reads):
            if name in self.KEPT:  # decoded only if its fallback is ever needed
                if self._kept is None:
                    self._kept = []
                self._kept.append(event)
            return ()  # named for nothing the parser reads now: not decoded (unhandled_name)
        data = event.data
        if "[DONE]" in data and data.strip() == "[DONE]":  # is_done_marker, inline
            return ()
        frame = load_frame(self.PROVIDER, event)
        kind = frame.get(self.TYPE_KEY)
        if type(kind) is not str or not kind:  # untyped: a relay's ``{"error": {...}}``
            kind = "error" if error_object(frame.get("error")) else name  # is an error
        handler = self.HANDLERS.get(kind)
        return handler(self, frame) if handler is not None else ()

    def final_frame(self) -> JsonObject:
        """The terminal frame's object, or a protocol error when the stream stopped early."""
        if self._final is None:
            msg = f"the stream ended before {self.FINAL_EVENT}"
            raise ProviderProtocolError(self.PROVIDER, msg)
        return self._final

