"""Events as JSON (camelCase keys, ``type`` included): what a stream and the turn-events
log carry for each event, and the camelCase views the reference server builds on."""

from __future__ import annotations

import functools
import json
from typing import Any

import attrs

from turnstate.core._events import TurnEvent


@functools.cache
def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


_SCALARS = (str, int, float, bool, type(None))
_FIELDS: dict[type, tuple[tuple[str, str], ...]] = {}


def _camel_fields(cls: type) -> tuple[tuple[str, str], ...]:
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = tuple((f.name, camel(f.name)) for f in attrs.fields(cls))
    return fields


def plain(value: Any) -> Any:
    """An attrs value as JSON-ready data with camelCase keys (what ``camel_keys`` of
    ``attrs.asdict`` gives, without building the intermediate snake_case dicts)."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {camel(str(k)): plain(v) for k, v in value.items()}
    if attrs.has(type(value)):
        return {key: plain(getattr(value, name)) for name, key in _camel_fields(type(value))}
    return value


_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def event_data(event: TurnEvent) -> str:
    """An engine event as one line of JSON: its fields, camelCase, ``type`` included.

    JSON escapes line breaks inside strings, so an SSE ``data`` field needs no splitting.
    """
    return _ENCODE(plain(event))
