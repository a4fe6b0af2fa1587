"""Structured output: the scripted model's answer as JSON when a request asks for it.

A request asks for JSON with Responses ``text.format`` (``json_schema`` / ``json_object``),
Chat Completions' ``response_format`` (the same two), Anthropic's ``output_config.format``
(``json_schema``) or Gemini Interactions' ``response_format`` (``mime_type``
``application/json``, with or without a ``schema``); ``emulators._settings`` reads each
into the neutral ``response_format`` (``{"schema", "name", "strict"}``, None for a plain
``text`` format). The scripted model then answers with JSON: a ``[[say:TEXT]]`` whose
TEXT is JSON as written, any other answer as ``minimal_instance(schema)`` (``{}`` in JSON
mode), compact. ``[[settings]]``, calls, refusals and replies a test pushed are left as
they are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from turnstate.core._json import compact_json

MAX_DEPTH = 16
"""How deep ``minimal_instance`` follows nested schemas and ``$ref`` (a recursive schema
stops there with the smallest value of the type)."""

_STRINGS = {"date-time": "2026-01-01T00:00:00Z", "date": "2026-01-01", "time": "00:00:00",
            "email": "user@example.com", "uri": "https://example.com/",
            "uuid": "00000000-0000-4000-8000-000000000000", "ipv4": "127.0.0.1"}


def structured_text(text: str, response_format: Any) -> str:
    """``text`` if it is JSON already, else the minimal instance of the format's schema."""
    try:
        json.loads(text)
    except ValueError:
        schema = response_format.get("schema") if isinstance(response_format, Mapping) else None
        return compact_json(minimal_instance(schema))
    return text


def minimal_instance(schema: Any) -> Any:
    """A small value valid against ``schema`` as far as reasonable: an object with its
    required properties (each minimal in its turn), ``enum``'s / ``const``'s first value,
    the first branch of ``anyOf`` / ``oneOf``, ``allOf`` merged, local ``$ref``s
    (``#/$defs/...``, ``#/definitions/...``) followed, ``minItems`` / ``minLength`` /
    ``minimum`` honoured, a few string ``format``s; ``{}`` for no schema."""
    if not isinstance(schema, Mapping):
        return {}
    return _value(schema, schema, 0)


def _value(schema: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> Any:
    schema = _resolved(schema, root)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        branches = [b for b in schema.get(key) or () if isinstance(b, Mapping)]
        if branches:
            return _value(_resolved(branches[0], root), root, depth + 1)
    if isinstance(schema.get("allOf"), list):
        schema = _merged(schema, root)
    kind = _type(schema)
    if kind == "object":
        if depth >= MAX_DEPTH:
            return {}
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = [k for k in schema.get("required") or () if isinstance(k, str)]
        return {key: _value(_sub(properties.get(key)), root, depth + 1) for key in required}
    if kind == "array":
        count = schema.get("minItems")
        count = count if type(count) is int and 0 < count <= 100 else 0
        items = _sub(schema.get("items"))
        if count == 0 or depth >= MAX_DEPTH:
            return []
        return [_value(items, root, depth + 1) for _ in range(count)]
    if kind in ("integer", "number"):
        return _number(schema, kind)
    return False if kind == "boolean" else None if kind == "null" else _string(schema)


def _number(schema: Mapping[str, Any], kind: str) -> int | float:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    value = low if isinstance(low, (int, float)) and not isinstance(low, bool) else 0
    if "exclusiveMinimum" in schema and "minimum" not in schema:
        value += 1
    return int(value) if kind == "integer" else value


def _string(schema: Mapping[str, Any]) -> str:
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt in _STRINGS:
        return _STRINGS[fmt]
    length = schema.get("minLength")
    return "x" * length if type(length) is int and 0 < length <= 1000 else ""


def _type(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):  # ["string", "null"]: the first that is not null
        kinds = [k for k in kind if isinstance(k, str)]
        kind = next((k for k in kinds if k != "null"), kinds[0] if kinds else None)
    if isinstance(kind, str):
        return kind
    return "object" if "properties" in schema else "string" if schema else "object"


def _sub(schema: Any) -> Mapping[str, Any]:
    return schema if isinstance(schema, Mapping) else {}


def _resolved(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` with a local ``$ref`` followed (at most ``MAX_DEPTH`` hops)."""
    for _ in range(MAX_DEPTH):
        ref = schema.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#"):
            return schema
        target: Any = root
        for part in ref.lstrip("#").strip("/").split("/") if ref != "#" else ():
            target = target.get(part) if isinstance(target, Mapping) else None
        schema = _sub(target)
    return schema


def _merged(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """``allOf``'s branches folded into one schema (properties and required joined)."""
    out: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    properties = dict(_sub(schema.get("properties")))
    required = list(schema.get("required") or ())
    for raw in schema["allOf"]:
        branch = _resolved(_sub(raw), root)
        properties.update(_sub(branch.get("properties")))
        required += [k for k in branch.get("required") or () if k not in required]
        for key, value in branch.items():
            out.setdefault(key, value)
    out["properties"], out["required"] = properties, required
    return out
