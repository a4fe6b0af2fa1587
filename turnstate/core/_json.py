"""JSON helpers shared by every boundary: canonical text, strict loading, JSON checks."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

JsonObject = dict[str, Any]
"""A decoded JSON object. Values are JSON values; the type stays loose on purpose."""

MAX_DEPTH = 64
"""The deepest nesting turnstate accepts in stored JSON (envelopes, metadata)."""

MAX_INT_BITS = 1024
"""Integers wider than this are refused: they cannot round-trip through every JSON reader."""


def _checked_encoder(*, sort_keys: bool) -> Callable[[Any], str]:
    """``JSONEncoder(sort_keys=..., separators=(",", ":"), ensure_ascii=False,
    allow_nan=False).encode``, through the stdlib's C encoder built once.

    ``encode`` builds that C encoder, and a dict for its circular-reference check, on
    every call (issue 26: a request body's encoding paid it per call). Built without the
    check, a cycle recurses until ``RecursionError``: the value is then encoded by the
    stdlib's ``encode`` itself, which reports the cycle as it always did (a
    ``ValueError``), so every value encodes or fails exactly as before (tested).
    """
    stdlib = json.JSONEncoder(sort_keys=sort_keys, separators=(",", ":"),
                              ensure_ascii=False, allow_nan=False)
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython has the C module
        return stdlib.encode
    chunks = make(None, stdlib.default, json.encoder.encode_basestring, None, ":", ",",
                  sort_keys, False, False)

    def encode(value: Any) -> str:
        try:
            return "".join(chunks(value, 0))
        except RecursionError:
            return stdlib.encode(value)  # a cycle (its ValueError) or a deep value

    return encode


# Built once, like ``_compact`` below: ``json.dumps`` with options builds a new encoder
# per call (issue 26: a cursor turn takes three digests, 1-2 us each saved).
_canonical = _checked_encoder(sort_keys=True)


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept as is: the text hashes are taken over."""
    return _canonical(value)


# Built once: ``json.dumps`` with options builds a new encoder per call, which costs
# more than encoding the small objects (envelopes, request bodies) of a cursor turn.
_compact = _checked_encoder(sort_keys=False)


def compact_json(value: Any) -> str:
    """Compact JSON in the key order given (what the wire and the database get)."""
    return _compact(value)


def tree_encoder(*, ensure_ascii: bool = False, allow_nan: bool = True
                 ) -> Callable[[Any], str]:
    """Compact JSON of a freshly built tree, through the stdlib's C encoder built once.

    ``JSONEncoder.encode`` builds that encoder, and a dict for its circular-reference
    check, on every call: most of the cost of a small object (issue 26: the server's
    events, the database's commit columns). The output is ``JSONEncoder.encode``'s byte
    for byte (tested). For trees built fresh from records (``cattrs``, the server's
    views), which hold no cycles: a cycle would recurse until ``RecursionError`` rather
    than be reported (the check's state cannot be shared safely between calls). Without
    the C module (another Python), it is ``JSONEncoder.encode`` itself.
    """
    stdlib = json.JSONEncoder(ensure_ascii=ensure_ascii, allow_nan=allow_nan,
                              separators=(",", ":"))
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return stdlib.encode
    strings = (json.encoder.encode_basestring_ascii if ensure_ascii
               else json.encoder.encode_basestring)
    chunks = make(None, stdlib.default, strings, None, ":", ",", False, False, allow_nan)

    def encode(value: Any) -> str:
        return "".join(chunks(value, 0))

    return encode


def _reject_constant(name: str) -> Any:
    msg = f"non-finite number {name} is not JSON"
    raise ValueError(msg)


def loads_strict(text: str | bytes) -> Any:
    """Parse JSON refusing NaN and the infinities (which the stdlib accepts by default).

    Raises ValueError (including UnicodeDecodeError) or RecursionError.
    """
    return json.loads(text, parse_constant=_reject_constant)


def json_problem(value: Any, depth: int = 0) -> str | None:
    """Say why ``value`` is not plain JSON (finite numbers, string keys, bounded depth).

    Returns None when it is. Iterative over siblings, recursive over depth, and the
    depth is bounded by ``MAX_DEPTH``, so this never overflows the stack.
    """
    if depth > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels"
    if value is None or isinstance(value, (bool, str)):
        return None
    if isinstance(value, int):
        return None if value.bit_length() <= MAX_INT_BITS else "an integer too large"
    if isinstance(value, float):
        return None if math.isfinite(value) else "a non-finite number"
    if isinstance(value, (list, tuple)):
        for item in value:
            problem = json_problem(item, depth + 1)
            if problem:
                return problem
        return None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return "an object key that is not a string"
            problem = json_problem(item, depth + 1)
            if problem:
                return problem
        return None
    return f"a value of type {type(value).__name__}"


def nested_deeper(text: str, value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value``, decoded from the JSON ``text``, nests containers deeper than
    ``limit``. A text with at most ``limit`` brackets cannot (two counts in C: the
    common case); otherwise the value is walked without recursion."""
    if text.count("{") + text.count("[") <= limit:
        return False
    level: list[Any] = [value]
    for _ in range(limit):  # ``level``: the values one level further in
        level = [child for item in level if isinstance(item, dict | list)
                 for child in (item.values() if isinstance(item, dict) else item)]
        if not any(isinstance(item, dict | list) for item in level):
            return False
    return True
