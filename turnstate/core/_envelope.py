"""The continuation envelope: the only durable continuation state of a chat.

Stored as compact camelCase JSON in ``chats.last_provider_state``::

    {"schemaVersion": 1, "provider": "openai", "mode": "responses", "modelName": "gpt-4o",
     "systemPromptHash": "abc123", "toolsetHash": "def456", "cursor": "resp_abc123"}

``parse_envelope`` is the single reader. Whatever it is given (text, bytes, a mapping,
or garbage) it returns a ``ContinuationEnvelope`` or raises ``EnvelopeMalformed``;
no other exception leaves it. Unknown keys are ignored so newer writers do not break
older readers; an unknown ``schemaVersion`` or a wrong type is malformed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import attrs

from turnstate.core._convert import register_camel, strict_converter
from turnstate.core._errors import ConfigurationError, EnvelopeMalformed
from turnstate.core._json import (
    MAX_INT_BITS,
    JsonObject,
    compact_json,
    json_problem,
    loads_strict,
)

SCHEMA_VERSION = 1
MAX_ENVELOPE_BYTES = 4 * 1024 * 1024
"""Bigger stored values are refused unread: no legitimate envelope comes close."""


class Mode(StrEnum):
    """How a provider continues: by a durable cursor, or by a loop local to one turn."""

    RESPONSES = "responses"
    INTERACTIONS = "interactions"
    STATELESS_LOOP = "stateless-loop"

    @property
    def durable(self) -> bool:
        return self is not Mode.STATELESS_LOOP


def _tuple_of_objects(value: Any) -> tuple[JsonObject, ...]:
    return tuple(value)


def _in_utc(value: datetime | None) -> datetime | None:
    # Normalise aware times to UTC; naive ones are left for the validator to refuse
    # (astimezone would read them as the machine's local time).
    if value is None or value.tzinfo is UTC or value.utcoffset() is None:
        return value  # None, UTC already (the clocks' values), or naive
    return value.astimezone(UTC)


def _require_aware(_: object, attribute: attrs.Attribute[Any], value: datetime | None) -> None:
    if value is not None and value.tzinfo is not UTC and value.utcoffset() is None:
        msg = f"{attribute.name} must be an aware datetime, got a naive one"
        raise ConfigurationError(msg)


@attrs.frozen(kw_only=True)
class ContinuationEnvelope:
    """A provider's continuation state, as the engine reads and writes it.

    Attributes:
        provider: registry name of the provider that issued the cursor.
        mode: ``responses`` / ``interactions`` (durable) or ``stateless-loop``.
        model_name: the model the cursor was issued for.
        system_prompt_hash: ``system_prompt_hash`` of the prompt in force.
        toolset_hash: ``toolset_hash`` of the tools in force.
        cursor: the provider's cursor (``resp_...``, ``v1_...``); None for stateless loops.
        created_at: when the cursor was issued: aware (a naive value is a
            ``ConfigurationError``), normalised to UTC.
        covers_seq: the last message sequence number the cursor covers.
        metadata: JSON object with cache metrics, compaction information and the like.
        loop_messages: stateless-loop only, the wire messages of the turn's tool loop.
            Never stored: ``decide_turn_persistence`` removes it.
    """

    provider: str
    mode: Mode
    model_name: str
    system_prompt_hash: str
    toolset_hash: str
    cursor: str | None = None
    created_at: datetime | None = attrs.field(
        default=None, converter=_in_utc, validator=_require_aware
    )
    covers_seq: int | None = None
    metadata: JsonObject | None = None
    loop_messages: tuple[JsonObject, ...] | None = attrs.field(
        default=None, converter=attrs.converters.optional(_tuple_of_objects)
    )
    schema_version: int = SCHEMA_VERSION

    def without_loop(self) -> ContinuationEnvelope:
        """The same envelope with no loop messages (what may be stored)."""
        return attrs.evolve(self, loop_messages=None)


_converter = strict_converter()
register_camel(_converter, ContinuationEnvelope)
_converter.register_structure_hook_func(
    lambda t: t == tuple[JsonObject, ...],
    lambda v, _: tuple(_converter.structure(item, JsonObject) for item in _as_list(v)),
)


def _as_list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        msg = f"expected a list, got {type(value).__name__}"
        raise TypeError(msg)
    return value


def _decode(raw: object) -> Mapping[str, Any]:
    if isinstance(raw, (str, bytes, bytearray, memoryview)):
        # Checked before decoding, so a huge blob is refused without being copied.
        size = raw.nbytes if isinstance(raw, memoryview) else len(raw)
        if size > MAX_ENVELOPE_BYTES:
            msg = "stored value is too large"
            raise ValueError(msg)
        if not isinstance(raw, str):
            raw = bytes(raw).decode("utf-8")
        raw = loads_strict(raw)
    if not isinstance(raw, Mapping):
        msg = f"expected a JSON object, got {type(raw).__name__}"
        raise TypeError(msg)
    return raw


def _check_shape(data: Mapping[str, Any]) -> None:
    version = data.get("schemaVersion")
    if type(version) is not int:
        msg = "schemaVersion is missing or not an integer"
        raise TypeError(msg)
    if version != SCHEMA_VERSION:
        msg = f"unknown schemaVersion {version}"
        raise ValueError(msg)
    problem = json_problem(dict(data))
    if problem:
        msg = f"envelope holds {problem}"
        raise ValueError(msg)


def _check_consistency(envelope: ContinuationEnvelope) -> None:
    if envelope.mode.durable:
        if envelope.cursor is None:
            msg = f"mode {envelope.mode} needs a cursor string"
            raise ValueError(msg)
        if envelope.loop_messages is not None:
            msg = "loopMessages belong to stateless-loop states only"
            raise ValueError(msg)
    if envelope.covers_seq is not None and envelope.covers_seq < 0:
        msg = "coversSeq is negative"
        raise ValueError(msg)


KNOWN_ENVELOPES = 1024
"""How many stored texts ``_known`` keeps the envelope of (the oldest go first)."""
KNOWN_TEXT_CHARS = 2048
"""Longer texts are never kept: a cursor envelope is about 400 characters."""

_known: OrderedDict[str, ContinuationEnvelope] = OrderedDict()
"""Envelope texts this process committed or read, and the envelope each reads as.

A cursor turn reads the envelope its chat's previous turn committed (issue 26: decoding
and checking it again was about 5 % of an engine turn). Only envelopes without metadata
or loop messages are kept: every field of those is immutable (frozen attrs, strings, an
int, an aware datetime, an enum), so one instance can be handed to every reader of the
text. At most ``KNOWN_ENVELOPES`` texts of at most ``KNOWN_TEXT_CHARS`` characters."""


def _remember(text: str, envelope: ContinuationEnvelope) -> None:
    if len(text) > KNOWN_TEXT_CHARS:
        return
    known = _known
    if len(known) >= KNOWN_ENVELOPES:
        # The oldest first, in O(1) (``next(iter(dict))`` would scan the slots freed at
        # the front). Another thread may get there first (a store's worker may parse).
        # A ``try`` costs nothing until it catches; ``contextlib.suppress`` was an object
        # and two calls on every commit once the memo is full (issue 26).
        try:  # noqa: SIM105 - suppress() here is the cost this avoids
            known.popitem(last=False)
        except KeyError:
            pass
    known[text] = envelope


def remember_envelope(text: str | None, envelope: ContinuationEnvelope) -> None:
    """Let ``parse_envelope(text)`` answer ``envelope`` without decoding ``text``.

    ``text`` must be ``serialize_envelope(envelope)`` as a store wrote it (the engine
    passes the chat row its commit returned, which the ``Store`` contract says holds
    exactly that). Kept only when decoding the text would give an equal envelope with
    nothing mutable in it (``_reads_back``): otherwise every reader decodes as before.
    """
    if type(text) is str and _reads_back(envelope):
        _remember(text, envelope)


def _reads_back(envelope: ContinuationEnvelope) -> bool:
    """Whether ``parse_envelope(serialize_envelope(envelope))`` is an envelope equal to
    ``envelope`` with nothing mutable in it: every field of the JSON type the parser
    demands and ASCII (so no store rewrites a lone surrogate on the way), and the
    consistency the parser checks."""
    provider, model, prompt, tools = (envelope.provider, envelope.model_name,
                                      envelope.system_prompt_hash, envelope.toolset_hash)
    cursor, seq, created = envelope.cursor, envelope.covers_seq, envelope.created_at
    return (envelope.metadata is None and envelope.loop_messages is None
            and type(envelope.schema_version) is int
            and envelope.schema_version == SCHEMA_VERSION
            and type(envelope.mode) is Mode
            # the four texts written out: a generator for ``all`` cost more than them
            and type(provider) is str and provider.isascii()
            and type(model) is str and model.isascii()
            and type(prompt) is str and prompt.isascii()
            and type(tools) is str and tools.isascii()
            and ((type(cursor) is str and cursor.isascii())
                 or (cursor is None and not envelope.mode.durable))
            and (seq is None or (type(seq) is int and seq >= 0
                                 and seq.bit_length() <= MAX_INT_BITS))
            and (created is None or type(created) is datetime))


def parse_envelope(raw: object) -> ContinuationEnvelope:
    """Read a stored envelope from text, bytes or a mapping.

    Raises:
        EnvelopeMalformed: for anything that is not a valid envelope, and only that.
    """
    if type(raw) is str:
        known = _known.get(raw)
        if known is not None:
            return known
    envelope = _parse(raw)
    if type(raw) is str and envelope.metadata is None and envelope.loop_messages is None:
        _remember(raw, envelope)
    return envelope


def _parse(raw: object) -> ContinuationEnvelope:
    try:
        data = _decode(raw)
        _check_shape(data)
        envelope = _converter.structure(dict(data), ContinuationEnvelope)
        _check_consistency(envelope)
    except EnvelopeMalformed:
        raise
    except Exception as exc:
        raise EnvelopeMalformed(_describe(exc)) from None
    return envelope


def _describe(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    text = str(exc) or type(exc).__name__
    return text[:200]


def unstructure_envelope(envelope: ContinuationEnvelope) -> JsonObject:
    """The envelope as a camelCase JSON object (None fields left out)."""
    data: JsonObject = {"schemaVersion": envelope.schema_version}
    data.update(_converter.unstructure(envelope))
    if envelope.loop_messages is not None:
        data["loopMessages"] = list(envelope.loop_messages)
    return data


def serialize_envelope(envelope: ContinuationEnvelope) -> str:
    """Compact camelCase JSON, the form stored in ``chats.last_provider_state``."""
    return compact_json(unstructure_envelope(envelope))
