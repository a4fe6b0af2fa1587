"""Events as JSON (camelCase keys, ``type`` included): what a turn's stream and its
turn-events log carry for each event, and the camelCase conversion the reference
server's views build on. Moved here from ``server._views`` (issue 21), so the engine's
detached turns log exactly what the server streams."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from turnstate.core._cost import TurnCost
from turnstate.core._events import StateChanged, TextDeltaEvent, TurnEvent
from turnstate.core._json import tree_encoder


@functools.cache
def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


_SCALARS = (str, int, float, bool, type(None))
_SCALAR_TYPES = frozenset(_SCALARS)

_FIELDS: dict[type, tuple[tuple[str, str], ...]] = {}


def _camel_fields(cls: type) -> tuple[tuple[str, str], ...]:
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = tuple((f.name, camel(f.name)) for f in attrs.fields(cls))
    return fields


def plain(value: Any) -> Any:
    """An attrs value as JSON-ready data with camelCase keys (what ``camel_keys`` of
    ``attrs.asdict`` gives, without building the intermediate snake_case dicts).

    Each type's conversion is chosen once and cached (``_converter``): an event's fields
    then cost a dict lookup each, not a chain of ``isinstance`` checks.
    """
    kind = type(value)
    if kind in _SCALAR_TYPES:
        return value
    convert = _CONVERTERS.get(kind)
    if convert is None:
        convert = _CONVERTERS[kind] = _converter(kind)
    return convert(value)


def _same(value: Any) -> Any:
    return value


def _sequence(value: Sequence[Any]) -> list[Any]:
    return [plain(item) for item in value]


def _mapping(value: dict[Any, Any]) -> dict[str, Any]:
    return {camel(str(k)): plain(v) for k, v in value.items()}


def _converter(kind: type) -> Callable[[Any], Any]:
    """How ``plain`` turns a value of ``kind`` into JSON-ready data."""
    if issubclass(kind, _SCALARS):  # str and int enums: JSON writes their values
        return _same
    if issubclass(kind, TurnCost):  # Decimals as exact strings, the total included
        return TurnCost.as_json
    if issubclass(kind, list | tuple):
        return _sequence
    if issubclass(kind, dict):
        return _mapping
    if attrs.has(kind):
        return _record(_camel_fields(kind))
    return _same


def _record(fields: tuple[tuple[str, str], ...]) -> Callable[[Any], dict[str, Any]]:
    def convert(value: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, key in fields:
            item = getattr(value, name)
            out[key] = item if type(item) in _SCALAR_TYPES else plain(item)
        return out

    return convert


_CONVERTERS: dict[type, Callable[[Any], Any]] = {}


_ENCODE = tree_encoder()
_ENCODE_ASCII = tree_encoder(ensure_ascii=True)
_STRING = json.encoder.encode_basestring  # the C encoder's own string escapers
_STRING_ASCII = json.encoder.encode_basestring_ascii


def _text_delta(event: Any, string: Callable[[str], str]) -> str | None:
    """A ``TextDeltaEvent`` (typed loosely: its text is checked, not trusted)."""
    text = event.text
    if not isinstance(text, str):
        return None
    return f'{{"text":{string(text)},"type":{string(event.type)}}}'


def _state_changed(event: Any, string: Callable[[str], str]) -> str | None:
    """A ``StateChanged`` (typed loosely: its fields are checked, not trusted)."""
    source, trigger, dest, reason = event.source, event.trigger, event.dest, event.reason
    if not (isinstance(source, str) and isinstance(trigger, str) and isinstance(dest, str)
            and (reason is None or isinstance(reason, str))):
        return None
    return (f'{{"source":{string(source)},"trigger":{string(trigger)},"dest":{string(dest)},'
            f'"reason":{"null" if reason is None else string(reason)},'
            f'"type":{string(event.type)}}}')


_DIRECT: dict[type, Callable[[Any, Callable[[str], str]], str | None]] = {
    TextDeltaEvent: _text_delta, StateChanged: _state_changed}
"""The two events a turn yields most (a delta per streamed chunk, a state change per
transition), written straight from their string fields: 0.2-0.4 us each instead of
1.0-2.0 us through ``plain`` and the tree encoder (issue 26), the same text (tested).
A field that is not a plain string (never, from the engine) takes the general path."""


def event_json(event: TurnEvent, *, ascii_only: bool = False) -> str:
    """An engine event as the SSE data line: its fields, camelCase, ``type`` included.

    One line: JSON escapes line breaks inside strings, so the SSE ``data`` field needs no
    splitting. ``ascii_only`` escapes every non-ASCII character (lone surrogates too).
    """
    direct = _DIRECT.get(type(event))
    if direct is not None:
        text = direct(event, _STRING_ASCII if ascii_only else _STRING)
        if text is not None:
            return text
    return (_ENCODE_ASCII if ascii_only else _ENCODE)(plain(event))
