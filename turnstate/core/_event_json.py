"""Events as JSON (camelCase keys, ``type`` included): what a turn's stream and its
turn-events log carry for each event, and the camelCase conversion the reference
server's views build on. Moved here from ``server._views`` (issue 21), so the engine's
detached turns log exactly what the server streams."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from turnstate.core._cost import TurnCost
from turnstate.core._events import TurnEvent
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


def event_json(event: TurnEvent, *, ascii_only: bool = False) -> str:
    """An engine event as the SSE data line: its fields, camelCase, ``type`` included.

    One line: JSON escapes line breaks inside strings, so the SSE ``data`` field needs no
    splitting. ``ascii_only`` escapes every non-ASCII character (lone surrogates too).
    """
    return (_ENCODE_ASCII if ascii_only else _ENCODE)(plain(event))
