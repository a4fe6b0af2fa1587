"""Building blocks for the strict cattrs converters used at turnstate's boundaries.

cattrs' defaults coerce (``str(5)`` is happily a string); at a storage or wire boundary
a wrong type is an error, so every primitive gets a strict hook here. Field names are
camelCase outside and snake_case inside; ``register_camel`` wires one attrs class.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from enum import Enum
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from turnstate.core._json import MAX_INT_BITS, json_problem

T = TypeVar("T")


def camel(name: str) -> str:
    """``system_prompt_hash`` → ``systemPromptHash``."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _expect(kind: type[Any], value: Any, what: str) -> None:
    if type(value) is not kind and not (kind is float and type(value) is int):
        msg = f"expected {what}, got {type(value).__name__}"
        raise TypeError(msg)


def _structure_str(value: Any, cls: Any) -> str:
    # StrEnums are str subclasses and land here too: the constructor checks the value.
    _expect(str, value, "a string")
    return str(value) if cls is str else cls(value)


def _structure_int(value: Any, _: Any) -> int:
    _expect(int, value, "an integer")
    if value.bit_length() > MAX_INT_BITS:
        msg = "integer too large"
        raise ValueError(msg)
    return int(value)


def _structure_bool(value: Any, _: Any) -> bool:
    _expect(bool, value, "a boolean")
    return bool(value)


def _structure_float(value: Any, _: Any) -> float:
    _expect(float, value, "a number")
    result = float(value)
    if not math.isfinite(result):
        msg = "non-finite number"
        raise ValueError(msg)
    return result


def parse_utc(value: Any) -> datetime:
    """An ISO-8601 timestamp with an offset (``Z`` allowed), as an aware UTC datetime."""
    _expect(str, value, "an ISO-8601 timestamp")
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        msg = "timestamp without a UTC offset"
        raise ValueError(msg)
    return parsed.astimezone(UTC)


_UTC_SECONDS = "%04d-%02d-%02dT%02d:%02d:%02dZ"
_UTC_MICROS = "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ"


def format_utc(value: datetime) -> str:
    """The inverse of ``parse_utc``: ``2026-01-31T12:00:00.5Z`` style, always UTC.

    A naive value is taken to be UTC already (``astimezone`` would read it as the
    machine's local time, making the stored text depend on where it was written).
    """
    if value.tzinfo is UTC:  # the clocks' own values: no offset to read or convert
        fields = (value.year, value.month, value.day, value.hour, value.minute,
                  value.second)
        if value.microsecond:  # ``isoformat``'s text, in one C call (issue 26)
            return _UTC_MICROS % (*fields, value.microsecond)
        return _UTC_SECONDS % fields
    aware = value.replace(tzinfo=UTC) if value.utcoffset() is None else value
    text = aware.astimezone(UTC).isoformat()
    return text.removesuffix("+00:00") + "Z"


def _structure_json_object(value: Any, _: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        msg = f"expected an object, got {type(value).__name__}"
        raise TypeError(msg)
    problem = json_problem(value)
    if problem:
        msg = f"object holds {problem}"
        raise ValueError(msg)
    return value


def strict_converter() -> cattrs.Converter:
    """A converter whose primitives refuse anything but their own JSON type."""
    converter = cattrs.Converter(detailed_validation=False)
    converter.register_structure_hook(str, _structure_str)
    converter.register_structure_hook(int, _structure_int)
    converter.register_structure_hook(bool, _structure_bool)
    converter.register_structure_hook(float, _structure_float)
    converter.register_structure_hook(datetime, lambda v, _: parse_utc(v))
    converter.register_unstructure_hook(datetime, format_utc)
    converter.register_structure_hook_func(lambda t: t == dict[str, Any], _structure_json_object)
    converter.register_unstructure_hook_func(
        lambda t: isinstance(t, type) and issubclass(t, Enum), lambda e: e.value
    )
    return converter


def register_camel(
    converter: cattrs.Converter,
    cls: type[T],
    *,
    omit_if_default: bool = True,
    renames: dict[str, str] | None = None,
    always: tuple[str, ...] = (),
) -> None:
    """(Un)structure ``cls`` with camelCase keys; defaults are left out when unstructuring
    (unless ``omit_if_default`` is False, or for the fields named in ``always``)."""
    attrs_cls: Any = cls
    attrs.resolve_types(attrs_cls)
    names = renames or {}
    overrides: dict[str, Any] = {
        a.name: override(rename=names.get(a.name, camel(a.name)),
                         omit_if_default=False if a.name in always else None)
        for a in attrs.fields(attrs_cls)
    }
    converter.register_structure_hook(cls, make_dict_structure_fn(attrs_cls, converter,
                                                                  **overrides))
    converter.register_unstructure_hook(
        cls,
        make_dict_unstructure_fn(attrs_cls, converter, _cattrs_omit_if_default=omit_if_default,
                                 **overrides),
    )

