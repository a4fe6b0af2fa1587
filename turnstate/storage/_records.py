"""The storage boundary: records and parts to row values and back, with one converter.

Both backends store exactly the same text: ``MemoryStore`` keeps rows as the column
values ``SqliteStore`` writes, so a check on stored bytes means the same thing for
either. Conventions of every stored value:

- JSON columns are compact JSON text with camelCase keys; every field is written, so
  a row reads the same to a human whatever the defaults are.
- Parts are a tagged union: ``{"type": "text", "text": "..."}``, the tags are
  ``PART_TAGS`` (stable strings, never class names).
- Timestamps are ISO-8601 UTC text of fixed width (``2026-01-31T12:00:00.000000Z``), so
  text order is time order and SQL can compare them directly.
- ``chats.last_provider_state`` is ``serialize_envelope`` of what
  ``decide_turn_persistence`` keeps; a stateless-loop state or loop messages are
  refused here, before any backend sees them (the second lock after the engine's).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import attrs
from cattrs.strategies import configure_tagged_union

from turnstate.core._citations import Citation
from turnstate.core._context import (
    ContextSnapshot,
)
from turnstate.core._conversation import (
    PART_TAGS,
    AuditState,
    OpaquePart,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    TransitionPart,
    Usage,
)
from turnstate.core._convert import parse_utc, register_camel, strict_converter
from turnstate.core._errors import (
    ConfigurationError,
    InvalidInput,
    LeanPartRefused,
    StorageError,
)
from turnstate.core._json import tree_encoder
from turnstate.core._media import MediaRef
from turnstate.core._path import PathStep
from turnstate.storage._media_json import register_media

Clock = Callable[[], datetime]
"""Where a store reads the time; injected by tests, ``utc_now`` by default."""

CLEAR_LOG = "[continuation][clear] chat=%s reason=%s"
RECLAIM_LOG = "[storage][reclaim] chat=%s turn=%s: lease expired at %s"
"""The INFO line every backend logs on the ``turnstate`` logger when it clears a cursor."""

LEASE_EXPIRED = "lease_expired"
"""The abort reason of a turn whose lease ran out (a crashed or stuck process)."""

FORBIDDEN_MARKERS = ('"stateless-loop"', '"loopMessages"')
"""JSON tokens no stored provider state may contain (DESIGN.md section 2, invariant 1)."""

_converter = strict_converter()
for _cls in (ReasoningPart, ToolCallPart, ToolResultPart, TransitionPart, OpaquePart,
             AuditState, PathStep):
    register_camel(_converter, _cls, omit_if_default=False)
# A usage's ``cacheWrite1hTokens`` is written only when not 0 (money4): every usage
# without one-hour cache writes is stored as it always was.
register_camel(_converter, Usage, omit_if_default=True,
               always=("input_tokens", "output_tokens", "cached_input_tokens",
                       "reasoning_tokens", "cache_hit_tokens", "cache_miss_tokens",
                       "cache_write_tokens"))
# A snapshot's ``droppedHistoryChars`` is written only when not 0 (gemctx): every stored
# snapshot before it reads as it did, and writes as it did.
register_camel(_converter, ContextSnapshot, omit_if_default=True,
               always=("estimated_input_tokens", "context_limit", "estimated_usage_ratio",
                       "severity", "source"))
# A text part without a phase (every provider but OpenAI) is stored as it always was,
# and so is one without citations; a citation writes the fields it has.
register_camel(_converter, Citation, omit_if_default=True)
register_camel(_converter, TextPart, omit_if_default=True)
register_media(_converter)  # images and files: base64, and their ``tokens``
configure_tagged_union(Part, _converter, tag_generator=PART_TAGS.__getitem__, tag_name="type")

_PARTS = tuple[Part, ...]
_PATH = tuple[PathStep, ...]
# Looked up once: history loads decode thousands of rows, and the generic dispatch of
# ``structure(value, tuple[Part, ...])`` costs more than the parts themselves.
_structure_part = _converter.get_structure_hook(Part)
_unstructure_parts = _converter.get_unstructure_hook(_PARTS)
_unstructure_part = _converter.get_unstructure_hook(Part)


def structure_part(item: Any) -> Part:
    """One stored part (a JSON tree) as its ``Part``."""
    return _structure_part(item, Part)  # type: ignore[no-any-return]


def _stored_part(part: Part) -> Any:
    """``part`` as stored; a ``MediaRef`` (a lean read's, not a ``Part``) is refused: it
    stands for bytes it does not hold."""
    if isinstance(part, MediaRef):
        raise LeanPartRefused
    try:
        return _unstructure_part(part)
    except KeyError:  # the union hook's bare ``KeyError(<class 'str'>)`` (embed5)
        field, msg = "parts", f"not a message part: {type(part).__name__}"
        raise InvalidInput(field, msg) from None


def _reject_constant(name: str) -> Any:
    msg = f"non-finite number {name} is not JSON"
    raise ValueError(msg)


# One decoder and one encoder for every row (``json.loads``/``json.dumps`` with options
# build a new one per call). The encoder writes exactly what ``compact_json`` writes;
# its input is always a tree ``cattrs`` just built.
_decoder = json.JSONDecoder(parse_constant=_reject_constant)
_encode = tree_encoder(allow_nan=False)
_quote: Callable[[str], str] = json.encoder.encode_basestring
"""A string's JSON, quoted: the very function ``_encode``'s C encoder calls for each
string it writes (``ensure_ascii=False``), so a text written out with it reads as the
tree's encoding of the same value; anything but a string is a ``TypeError``."""
T = TypeVar("T")
_NOT_ENCODED = (TypeError, ValueError, AttributeError, RecursionError)
"""What a fast tree's encoding raises when its value holds what only the converter
writes (or nothing can): each fast encoder then falls back to the converter's answer."""


def utc_now() -> datetime:
    """The default clock."""
    return datetime.now(UTC)


_TS = "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ"
"""``format_ts``'s text of a UTC value's fields, formatted in one C call (issue 26:
``isoformat(timespec=...)`` parsed its keyword and wrote the offset it then cut off,
about twice the cost, four times a turn)."""


def format_ts(value: datetime) -> str:
    """Fixed-width ISO-8601 UTC text; a naive value is taken to be UTC already."""
    if value.tzinfo is UTC:  # the clocks' own values: no offset to read or convert
        return _TS % (value.year, value.month, value.day, value.hour, value.minute,
                      value.second, value.microsecond)
    aware = value.replace(tzinfo=UTC) if value.utcoffset() is None else value
    return aware.astimezone(UTC).isoformat(timespec="microseconds").removesuffix("+00:00") + "Z"


@functools.lru_cache(maxsize=4096)
def parse_ts(text: str) -> datetime:
    """The inverse of ``format_ts``: an aware UTC datetime.

    Cached: a history's rows share few distinct timestamps (a commit stamps both of its
    messages alike), and datetimes are immutable.
    """
    if len(text) == 27 and text[-1] == "Z":  # our own fixed-width form
        return datetime.fromisoformat(text)
    return parse_utc(text)


_SPANS: dict[float, timedelta] = {}
"""Each lease length's ``timedelta`` once built (a few lengths per process; building one
from keyword seconds cost more than the addition, on every begin and renewal)."""
_SPANS_KEPT = 64


def lease_expiry(now: datetime, lease_seconds: float) -> datetime:
    """``now + lease_seconds``; a lease must be a positive, finite, representable span."""
    span = _SPANS.get(lease_seconds)
    if span is None:
        if not (math.isfinite(lease_seconds) and lease_seconds > 0):
            msg = f"lease_seconds must be a positive finite number, got {lease_seconds!r}"
            raise ConfigurationError(msg)
        try:
            span = timedelta(seconds=lease_seconds)
        except OverflowError:
            msg = f"lease_seconds {lease_seconds!r} is too large"
            raise ConfigurationError(msg) from None
        if len(_SPANS) < _SPANS_KEPT:
            _SPANS[lease_seconds] = span
    try:
        return now + span
    except OverflowError:
        msg = f"lease_seconds {lease_seconds!r} is too large"
        raise ConfigurationError(msg) from None


_USER_SUFFIX, _ANSWER_SUFFIX = ":user", ":assistant"


def message_ids(turn_id: str) -> tuple[str, str]:
    """The ids of a turn's user and assistant messages: derived, so every backend agrees."""
    return turn_id + _USER_SUFFIX, turn_id + _ANSWER_SUFFIX


def answer_turn_id(message_id: str) -> str | None:
    """The turn id an assistant message's id is derived from (``message_ids``), or
    ``None`` for any other id."""
    if message_id.endswith(_ANSWER_SUFFIX):
        return message_id[:-len(_ANSWER_SUFFIX)]
    return None


def _dump(value: Any, what: str) -> str:
    try:
        return utf8_safe(_encode(value), value)
    except (TypeError, ValueError, RecursionError) as exc:
        msg = f"cannot store {what}: {exc}"
        raise StorageError(msg) from None


def utf8_safe(text: str, value: Any = None) -> str:
    """``text`` itself, or the same JSON with non-ASCII escaped when it holds lone surrogates.

    A model's output can carry a lone surrogate (a ``\\ud800`` escape decodes to one); it
    cannot be UTF-8, so SQLite could not store it. Escaped, it round-trips unchanged.
    """
    if text.isascii():  # no surrogate possible, and no bytes made to find out
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        data = json.loads(text) if value is None else value
        return json.dumps(data, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return text


def _load(text: str, what: str) -> Any:
    try:
        return _decoder.decode(text)
    except (ValueError, RecursionError) as exc:
        msg = f"stored {what} is not JSON: {exc}"
        raise StorageError(msg) from None


def _structure(value: Any, cls: Any, what: str) -> Any:
    try:
        return _converter.structure(value, cls)
    except Exception as exc:  # cattrs raises many kinds; the row is unreadable either way
        msg = f"stored {what} is unreadable: {exc}"
        raise StorageError(msg) from None


def encode_parts(parts: Sequence[Part]) -> str:
    """The parts column: a plain text part written out (a turn's user message, most
    often), any other part through the converter's union hook (tested equal)."""
    tree = [{"text": part.text, "type": _TEXT_TAG}
            if type(part) is TextPart and part.phase is None and not part.citations
            else _stored_part(part)
            for part in parts]
    return _dump(tree, "message parts")


def _commit_parts(parts: Sequence[Part]) -> str:
    """``encode_parts(with_parts_recovered(parts))``: the commit's parts, a plain text
    part written out, any other through the converter's union hook (tested equal).

    An answer of plain text parts only (most answers) is written as text, each part's
    text quoted by ``_quote``: what the tree's encoding writes, without the tree."""
    texts: list[str] = []
    try:
        for part in parts:  # a loop, not a comprehension: no code object of its own
            if type(part) is not TextPart or part.phase is not None or part.citations:
                break
            texts.append(_TEXT_PART % _quote(part.text))
        else:
            return utf8_safe("[" + ",".join(texts) + "]")
    except _NOT_ENCODED:
        pass  # a text that is no ``str``: the tree's answer, or its error
    tree = []
    for part in parts:
        if type(part) is TextPart and part.phase is None and not part.citations:
            tree.append({"text": part.text, "type": _TEXT_TAG})
        elif isinstance(part, TransitionPart):
            tree.append(_unstructure_part(attrs.evolve(part, recovered=True)))
        else:
            tree.append(_stored_part(part))
    return _dump(tree, "message parts")


def decode_parts(text: str) -> tuple[Part, ...]:
    data = _load(text, "message parts")
    if not isinstance(data, list):
        msg = "stored message parts are not a JSON list"
        raise StorageError(msg)
    try:
        return tuple([_structure_part(item, Part) for item in data])
    except Exception as exc:  # cattrs raises many kinds; the row is unreadable either way
        msg = f"stored message parts are unreadable: {exc}"
        raise StorageError(msg) from None


_STEP_TEXTS: dict[tuple[str, str, str, str | None], str] = {}
"""Each path step's JSON by its fields: a turn's steps are a few edges of the table
with their reason codes, written again every turn (at most ``_STEP_TEXTS_KEPT``)."""
_STEP_TEXTS_KEPT = 1024


def encode_path(path: Sequence[PathStep]) -> str:
    """The path column: each step's JSON object (kept by its fields once written: the
    compact array of the same objects, tested equal), in order."""
    try:
        texts = []
        for step in path:
            key = (step.source, step.trigger, step.dest, step.reason)
            text = _STEP_TEXTS.get(key)
            if text is None:
                text = _encode(_path_step_tree(step))
                if len(_STEP_TEXTS) < _STEP_TEXTS_KEPT:
                    _STEP_TEXTS[key] = text
            texts.append(text)
        return utf8_safe("[" + ",".join(texts) + "]")
    except _NOT_ENCODED:
        return _dump(_converter.unstructure(tuple(path), _PATH), "turn path")


def decode_path(text: str) -> tuple[PathStep, ...]:
    data = _load(text, "turn path")
    if not isinstance(data, list):
        msg = "stored turn path is not a JSON list"
        raise StorageError(msg)
    path: tuple[PathStep, ...] = _structure(data, _PATH, "turn path")
    return path


def decode_usage(text: str | None) -> Usage | None:
    if text is None:
        return None
    usage: Usage = _structure(_load(text, "usage"), Usage, "usage")
    return usage


def decode_context(text: str) -> ContextSnapshot:
    """Read ``chats.last_context_state`` (the store hands the text out; this is for callers)."""
    snapshot: ContextSnapshot = _structure(_load(text, "context snapshot"), ContextSnapshot,
                                           "context snapshot")
    return snapshot


def decode_audit(text: str) -> AuditState:
    """Read ``messages.provider_state``: for inspection only, never for continuation."""
    audit: AuditState = _structure(_load(text, "audit state"), AuditState, "audit state")
    return audit


def with_parts_recovered(parts: Sequence[Part]) -> tuple[Part, ...]:
    """The commit's parts, every transition part marked ``recovered``."""
    return tuple([attrs.evolve(p, recovered=True) if isinstance(p, TransitionPart) else p
                  for p in parts])


# The commit's typed columns as the trees the converter's hooks build, written out
# (issue 26: the generic dispatch, and cattrs walking the audit metadata value by value,
# cost more than the encoding itself). The converter stays the source of truth: every
# encoder above falls back to it when a tree cannot be encoded, and
# tests/storage/test_records.py holds each tree's JSON to the converter's for generated
# values, every field set.
_TEXT_TAG = PART_TAGS[TextPart]
_TEXT_PART = '{"text":%s,"type":"' + _TEXT_TAG + '"}'


def _path_step_tree(step: PathStep) -> dict[str, Any]:
    return {"source": step.source, "trigger": step.trigger, "dest": step.dest,
            "reason": step.reason}
