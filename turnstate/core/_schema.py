"""A small JSON-schema checker for tool arguments.

Tool schemas in the wild use a modest subset of JSON Schema; this checks that subset
(``type``, ``properties``, ``required``, ``additionalProperties``, ``items``, ``enum``,
``const``, numeric and length bounds, ``pattern``, ``anyOf`` / ``oneOf`` / ``allOf``,
and ``$ref`` to a place in the same schema, such as pydantic's ``#/$defs/Model``) and
ignores keywords it does not know (and a ``$ref`` it cannot resolve), so an exotic schema
never blocks a call. The point is a clear error the model can act on, not full
validation (docs/decisions.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from turnstate.core._json import json_problem

_TYPES: dict[str, tuple[type[Any], ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}


def _type_ok(value: Any, name: str) -> bool:
    kinds = _TYPES.get(name)
    if kinds is None:
        return True
    if isinstance(value, bool) and name in {"integer", "number"}:
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, kinds)


_NO_REFS: frozenset[str] = frozenset()


def schema_problems(value: Any, schema: Any, path: str = "", *, root: Any = None,
                    refs: frozenset[str] = _NO_REFS) -> list[str]:
    """Every way ``value`` breaks ``schema``; an empty list means it conforms.

    ``true`` (and anything that is not a schema object) accepts every value, ``false``
    none: boolean subschemas are valid JSON schema, and ``definition_problems`` lets them
    through, so the check must take them anywhere a subschema stands.

    ``root``: the whole schema, where a ``$ref`` (``#/$defs/Address``, ``#``) is looked
    up (``schema`` itself at the top); ``refs``: the references followed since the check
    last went into a property or an item, so a reference cycle that never reaches the
    value's next level (``{"$ref": "#"}`` at the top) is followed once, not for ever.
    """
    where = path or "arguments"
    if schema is False:
        return [f"{where}: no value is allowed here"]
    if not isinstance(schema, Mapping):
        return []
    if root is None:
        root = schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref not in refs:
        target = _resolve(root, ref)
        if target is not None:  # its keywords, then the ones beside it (2019-09 on)
            found = schema_problems(value, target, path, root=root, refs=refs | {ref})
            if found:
                return found
    problems = _type_problems(value, schema, where)
    if problems:
        return problems
    problems += _value_problems(value, schema, where)
    if isinstance(value, dict):
        problems += _object_problems(value, schema, path, root)
    if isinstance(value, list):
        problems += _array_problems(value, schema, path, root)
    problems += _combinator_problems(value, schema, path, root, refs)
    return problems


NOWHERE: Any = object()
"""What ``ref_target`` gives for a ``$ref`` that names nothing in its schema."""


def ref_target(root: Any, ref: str) -> Any:
    """The node a local ``$ref`` (``#`` and a JSON pointer, ``~0``/``~1`` escaped) names
    in ``root``, or ``NOWHERE`` when it names nothing there or is not local (nothing is
    fetched). The argument check here and the providers' inlining of refs
    (``providers/_schema_refs.py``) both read refs so."""
    if not ref.startswith("#"):
        return NOWHERE
    node = root
    for token in ref[1:].split("/")[1:]:
        key = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return NOWHERE
    return node


def _resolve(root: Any, ref: str) -> Any:
    """The subschema a local ``$ref`` names in ``root``, or None when it names no schema
    there (or is not local)."""
    node = ref_target(root, ref)
    return node if isinstance(node, Mapping | bool) else None


def _type_problems(value: Any, schema: Mapping[str, Any], where: str) -> list[str]:
    expected = schema.get("type")
    if expected is None:
        return []
    names = expected if isinstance(expected, list) else [expected]
    if any(_type_ok(value, str(name)) for name in names):
        return []
    return [f"{where}: expected {' or '.join(map(str, names))}, got {type(value).__name__}"]


def _value_problems(value: Any, schema: Mapping[str, Any], where: str) -> list[str]:
    problems = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: must be one of {schema['enum']!r}")
    if "const" in schema and value != schema["const"]:
        problems.append(f"{where}: must be {schema['const']!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        problems += _bound_problems(value, schema, where)
    if isinstance(value, str):
        problems += _length_problems(len(value), schema, where, "minLength", "maxLength")
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and _search(pattern, value) is False:
            problems.append(f"{where}: does not match pattern {pattern!r}")
    return problems


def _search(pattern: str, value: str) -> bool | None:
    try:
        return re.search(pattern, value) is not None
    except re.error:
        return None  # a pattern Python cannot compile is not the model's fault


def _bound_problems(value: float, schema: Mapping[str, Any], where: str) -> list[str]:
    problems = []
    for key, words in _BOUNDS:
        bound = schema.get(key)
        if isinstance(bound, (int, float)) and _breaks(key, value, bound):
            problems.append(f"{where}: must be {words} {bound}")
    return problems


_BOUNDS = (("minimum", "at least"), ("maximum", "at most"),
           ("exclusiveMinimum", "more than"), ("exclusiveMaximum", "less than"))


def _breaks(key: str, value: float, bound: float) -> bool:
    if key == "minimum":
        return value < bound
    if key == "maximum":
        return value > bound
    if key == "exclusiveMinimum":
        return value <= bound
    return value >= bound


def _length_problems(
    size: int, schema: Mapping[str, Any], where: str, low: str, high: str
) -> list[str]:
    problems = []
    if isinstance(schema.get(low), int) and size < schema[low]:
        problems.append(f"{where}: needs at least {schema[low]} (has {size})")
    if isinstance(schema.get(high), int) and size > schema[high]:
        problems.append(f"{where}: allows at most {schema[high]} (has {size})")
    return problems


def _object_problems(value: dict[str, Any], schema: Mapping[str, Any], path: str,
                     root: Any) -> list[str]:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    problems = [
        f"{path or 'arguments'}: missing required property {name!r}"
        for name in schema.get("required") or []
        if isinstance(name, str) and name not in value
    ]
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        child = f"{path}/{key}"
        if key in properties:
            problems += schema_problems(item, properties[key], child, root=root)
        elif extra is False:
            problems.append(f"{child}: unexpected property")
        elif isinstance(extra, Mapping):
            problems += schema_problems(item, extra, child, root=root)
    return problems


def _array_problems(value: list[Any], schema: Mapping[str, Any], path: str,
                    root: Any) -> list[str]:
    problems = _length_problems(len(value), schema, path or "arguments", "minItems", "maxItems")
    items = schema.get("items")
    if isinstance(items, Mapping) or items is False:
        for index, item in enumerate(value):
            problems += schema_problems(item, items, f"{path}/{index}", root=root)
    return problems


def _combinator_problems(value: Any, schema: Mapping[str, Any], path: str, root: Any,
                         refs: frozenset[str]) -> list[str]:
    where = path or "arguments"
    problems = []
    for sub in schema.get("allOf") or []:
        problems += schema_problems(value, sub, path, root=root, refs=refs)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            passing = sum(1 for sub in options
                          if not schema_problems(value, sub, path, root=root, refs=refs))
            if passing == 0 or (key == "oneOf" and passing > 1):
                problems.append(f"{where}: does not match {key}")
    return problems


# --- checking a tool's own schema, once, when the tool is defined -----------------------

_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_ONE = ("items", "additionalProperties", "not", "if", "then", "else")


def definition_problems(schema: Any) -> list[str]:
    """What makes ``schema`` unusable as a tool's parameters (an empty list: none).

    The parameters must be plain JSON (``json_problem``) and a JSON-schema object: a
    mapping whose ``type``, if given, is ``"object"``. Below the top, every subschema is
    checked for the shapes providers reject: a ``type`` that is not a known type name
    (or a list of them), an ``array`` type without ``items`` (OpenAI: "array schema
    missing items", Gemini: "items: missing field"; Anthropic takes it, but a chat's
    tools go to whichever provider it moves to), ``properties`` that is not an object of
    schemas, ``required`` that is not a list of strings. Unknown keywords are left alone.
    ``json_problem`` bounds the depth, so the recursion is bounded too.
    """
    problem = json_problem(schema)
    if problem is not None:
        return [f"not JSON: {problem}"]
    if not isinstance(schema, dict):
        return [f"must be a JSON object, got {type(schema).__name__}"]
    if schema.get("type", "object") != "object":
        return [f"the top-level type must be 'object', got {schema['type']!r}"]
    return _subschema_problems(schema, "parameters")


def _subschema_problems(schema: Any, where: str) -> list[str]:
    if isinstance(schema, bool):  # true / false are schemas too
        return []
    if not isinstance(schema, dict):
        return [f"{where}: a schema must be an object, got {type(schema).__name__}"]
    problems = _keyword_problems(schema, where)
    for key in _SUBSCHEMA_MAPS:
        value = schema.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            problems.append(f"{where}.{key}: must be an object of schemas")
            continue
        for name, sub in value.items():
            problems += _subschema_problems(sub, f"{where}.{key}.{name}")
    for key in _SUBSCHEMA_LISTS:
        value = schema.get(key)
        if value is not None and not isinstance(value, list):
            problems.append(f"{where}.{key}: must be a list of schemas")
        for index, sub in enumerate(value if isinstance(value, list) else []):
            problems += _subschema_problems(sub, f"{where}.{key}[{index}]")
    for key in _SUBSCHEMA_ONE:
        if key in schema:
            problems += _subschema_problems(schema[key], f"{where}.{key}")
    return problems


def _keyword_problems(schema: dict[str, Any], where: str) -> list[str]:
    problems = []
    kind = schema.get("type")
    names = kind if isinstance(kind, list) else [kind]
    if kind is not None and not all(isinstance(n, str) and n in _TYPES for n in names):
        problems.append(f"{where}.type: {kind!r} is not a JSON-schema type")
    elif "array" in names and "items" not in schema:
        problems.append(f'{where}: an array schema needs "items" (OpenAI and Gemini refuse '
                        'it without; {} takes any item)')
    required = schema.get("required")
    if required is not None and not (isinstance(required, list)
                                     and all(isinstance(n, str) for n in required)):
        problems.append(f"{where}.required: must be a list of property names")
    enum = schema.get("enum")
    if enum is not None and not isinstance(enum, list):
        problems.append(f"{where}.enum: must be a list")
    return problems
