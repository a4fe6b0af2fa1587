"""Hypothesis strategies shared by the test suites.

Each section belongs to one part of the package; new sections go at the end of the file.

Engine foundation (first section): JSON values, continuation envelopes in object and
mapping form, the broken inputs ``parse_envelope`` must refuse, tool specs with
JSON-schema parameters, and ``TurnContext`` values. The mapping form of an envelope is
written here by hand (``envelope_mapping``), not by the serializer under test, so a test
that parses it checks the reader against an independent writer.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from random import Random
from typing import Any

from hypothesis import strategies as st

from turnstate.core._decisions import TurnContext
from turnstate.core._envelope import ContinuationEnvelope, Mode
from turnstate.core._json import MAX_INT_BITS, canonical_json

# --------------------------------------------------------------------------------------
# Engine foundation: JSON values
# --------------------------------------------------------------------------------------

JSON_INT_BOUND = 2**MAX_INT_BITS - 1
"""The widest integer a stored JSON value may hold (``MAX_INT_BITS`` bits)."""

json_ints = st.integers(min_value=-JSON_INT_BOUND, max_value=JSON_INT_BOUND)
json_scalars: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    json_ints,
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
"""Every kind of JSON scalar, numbers finite and within the accepted width."""

_keys = st.text(max_size=8)


def json_values(max_leaves: int = 8) -> st.SearchStrategy[Any]:
    """JSON values (lists and objects of scalars), shallow enough for any stored field."""
    return st.recursive(
        json_scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
        max_leaves=max_leaves,
    )


def json_objects(max_leaves: int = 8, max_size: int = 4) -> st.SearchStrategy[dict[str, Any]]:
    """JSON objects whose values are any JSON values."""
    return st.dictionaries(_keys, json_values(max_leaves), max_size=max_size)


def json_depth(value: Any) -> int:
    """Nesting depth of a JSON value (a scalar is 0, ``[]`` is 1)."""
    if isinstance(value, dict):
        return 1 + max((json_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((json_depth(v) for v in value), default=0)
    return 0


# --------------------------------------------------------------------------------------
# Engine foundation: envelopes
# --------------------------------------------------------------------------------------

offset_timezones: st.SearchStrategy[tzinfo] = st.one_of(
    st.just(UTC),
    st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1).map(
        lambda minutes: timezone(timedelta(minutes=minutes))
    ),
)
"""UTC and every whole-minute fixed offset (no tz database needed)."""

aware_datetimes = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=offset_timezones
)
"""Aware datetimes in many offsets, far enough from the calendar's ends to convert to UTC."""

DURABLE_MODES = (Mode.RESPONSES, Mode.INTERACTIONS)
names = st.text(max_size=10)
"""Provider, model and hash strings: any text, including empty and exotic ones."""
cursors = st.text(max_size=12)
"""Durable cursors, blank ones included (those are ``cursor_invalid``, not malformed)."""
covers_seqs = st.integers(min_value=0, max_value=2**63 - 1)

# Strategies are built once, here: building them inside a composite makes hypothesis
# validate them again for every example, which dominated the run time.
_metadata = st.none() | json_objects(5, max_size=3)
_loop_messages = st.none() | st.lists(json_objects(3, max_size=3), max_size=3).map(tuple)
_created_at = st.none() | aware_datetimes
_covers_seq = st.none() | covers_seqs


def envelopes(
    *,
    modes: Sequence[Mode] = tuple(Mode),
    providers: st.SearchStrategy[str] = names,
    models: st.SearchStrategy[str] = names,
    hashes: st.SearchStrategy[str] = names,
    cursor: st.SearchStrategy[str] = cursors,
    created_at: st.SearchStrategy[datetime | None] = _created_at,
    covers_seq: st.SearchStrategy[int | None] = _covers_seq,
    metadata: st.SearchStrategy[dict[str, Any] | None] = _metadata,
    loop_messages: st.SearchStrategy[tuple[dict[str, Any], ...] | None] = _loop_messages,
) -> st.SearchStrategy[ContinuationEnvelope]:
    """Valid envelopes: every optional field may be drawn; loop messages only for loops.

    Narrow ``providers`` / ``models`` / ``hashes`` (and the times and sequence numbers) to
    make envelopes that match a context; pass ``st.none()`` to leave a field out.
    """
    pick_mode = st.sampled_from(tuple(modes))

    @st.composite
    def build(draw: st.DrawFn) -> ContinuationEnvelope:
        mode = draw(pick_mode)
        return ContinuationEnvelope(
            provider=draw(providers),
            mode=mode,
            model_name=draw(models),
            system_prompt_hash=draw(hashes),
            toolset_hash=draw(hashes),
            cursor=draw(cursor) if mode.durable else None,
            created_at=draw(created_at),
            covers_seq=draw(covers_seq),
            metadata=draw(metadata),
            loop_messages=None if mode.durable else draw(loop_messages),
        )

    return build()


def durable_envelopes(**kwargs: Any) -> st.SearchStrategy[ContinuationEnvelope]:
    """Valid ``responses`` / ``interactions`` envelopes (see ``envelopes``)."""
    return envelopes(modes=DURABLE_MODES, **kwargs)


def loop_envelopes(**kwargs: Any) -> st.SearchStrategy[ContinuationEnvelope]:
    """Valid ``stateless-loop`` states, with or without loop messages."""
    return envelopes(modes=(Mode.STATELESS_LOOP,), **kwargs)


def envelope_mapping(
    envelope: ContinuationEnvelope, *, offset: tzinfo | None = None, zulu: bool = False
) -> dict[str, Any]:
    """The stored (camelCase) form of ``envelope``, written independently of the serializer.

    ``createdAt`` is written in ``offset`` (default UTC) as ``+hh:mm``, or with ``Z``.
    """
    data: dict[str, Any] = {
        "schemaVersion": 1,
        "provider": envelope.provider,
        "mode": envelope.mode.value,
        "modelName": envelope.model_name,
        "systemPromptHash": envelope.system_prompt_hash,
        "toolsetHash": envelope.toolset_hash,
    }
    if envelope.cursor is not None:
        data["cursor"] = envelope.cursor
    if envelope.created_at is not None:
        when = envelope.created_at
        data["createdAt"] = (
            when.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z" if zulu
            else when.astimezone(offset or UTC).isoformat()
        )
    if envelope.covers_seq is not None:
        data["coversSeq"] = envelope.covers_seq
    if envelope.metadata is not None:
        data["metadata"] = envelope.metadata
    if envelope.loop_messages is not None:
        data["loopMessages"] = list(envelope.loop_messages)
    return data


any_envelopes = envelopes()
"""Valid envelopes of every mode."""


@st.composite
def envelope_mappings(draw: st.DrawFn) -> dict[str, Any]:
    """Valid stored envelopes as mappings (``createdAt`` in any offset, or with ``Z``)."""
    envelope = draw(any_envelopes)
    return envelope_mapping(envelope, offset=draw(offset_timezones), zulu=draw(st.booleans()))


# What a field's value must be, and values of every other JSON type.
_non_string = st.one_of(json_ints, st.floats(), st.booleans(),
                        st.lists(json_scalars, max_size=2), st.dictionaries(_keys, json_scalars,
                                                                            max_size=2))
_non_int = st.one_of(st.floats(), st.booleans(), st.text(max_size=4),
                     st.lists(json_scalars, max_size=2), st.dictionaries(_keys, json_scalars,
                                                                         max_size=2))
_non_object = st.one_of(json_scalars.filter(lambda v: v is not None),
                        st.lists(json_scalars, max_size=3))
_non_list = st.one_of(json_scalars.filter(lambda v: v is not None),
                      st.dictionaries(_keys, json_scalars, max_size=2))
_not_a_timestamp = st.one_of(
    _non_string,
    st.sampled_from(["", "yesterday", "2026-01-01", "2026-01-01T00:00:00", "2026-13-01T00:00Z",
                     "0001-01-01T00:00:00+01:00"]),
)
_bad_loop = _non_list | st.tuples(
    st.lists(json_objects(4, max_size=2), max_size=2), st.lists(_non_object, min_size=1, max_size=2)
).map(lambda parts: parts[0] + parts[1])
_unknown_modes = st.text(max_size=16).filter(lambda s: s not in {m.value for m in Mode})


_required_text = _non_string | st.none()
_WRONG_COMMON: dict[str, st.SearchStrategy[Any]] = {
    "schemaVersion": st.none() | _non_int | st.just(1.0) | st.just(True),
    "provider": _required_text,
    "mode": _required_text | _unknown_modes,
    "modelName": _required_text,
    "systemPromptHash": _required_text,
    "toolsetHash": _required_text,
    "createdAt": _not_a_timestamp,
    "coversSeq": _non_int | st.integers(max_value=-1),
    "metadata": _non_object,
}
_WRONG_DURABLE = {**_WRONG_COMMON, "cursor": _required_text,
                  "loopMessages": st.lists(json_objects(4, max_size=2), max_size=2)}
_WRONG_LOOP = {**_WRONG_COMMON, "cursor": _non_string, "loopMessages": _bad_loop}


def wrong_values(field: str, mode: Mode) -> st.SearchStrategy[Any]:
    """Values that make ``field`` of an envelope in ``mode`` unacceptable.

    For a durable mode any ``loopMessages`` (even ``[]``) and a null ``cursor`` are wrong;
    for a stateless loop a null ``cursor`` is fine, so only other types are.
    """
    return (_WRONG_DURABLE if mode.durable else _WRONG_LOOP)[field]


ENVELOPE_FIELDS = ("schemaVersion", "provider", "mode", "modelName", "systemPromptHash",
                   "toolsetHash", "cursor", "createdAt", "coversSeq", "metadata", "loopMessages")
"""Every camelCase field of the stored envelope."""
_fields = st.sampled_from(ENVELOPE_FIELDS)


@st.composite
def envelopes_with_wrong_field(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A valid stored envelope with exactly one field (present or added) made unacceptable.

    Returns the field's name and the mapping.
    """
    envelope = draw(any_envelopes)
    data = envelope_mapping(envelope)
    field = draw(_fields)
    data[field] = draw(wrong_values(field, envelope.mode))
    return field, data


any_envelope_mappings = envelope_mappings()
"""Valid stored envelopes of every mode, as mappings."""
_edit = st.tuples(_fields, st.none() | json_values(3))


@st.composite
def near_valid_envelope_mappings(draw: st.DrawFn) -> dict[str, Any]:
    """Valid stored envelopes with one to three fields dropped or set to any JSON value.

    Some stay acceptable (an optional field dropped or nulled), most do not.
    """
    data = draw(any_envelope_mappings)
    for field, value in draw(st.lists(_edit, min_size=1, max_size=3)):
        if value is None and draw(st.booleans()):
            data.pop(field, None)
        else:
            data[field] = value
    return data


_modes = st.sampled_from(tuple(Mode))


@st.composite
def plain_envelope_mappings(draw: st.DrawFn) -> dict[str, Any]:
    """Cheap valid stored envelopes (no metadata, no loop messages) to splice values into."""
    mode = draw(_modes)
    data: dict[str, Any] = {
        "schemaVersion": 1, "provider": draw(names), "mode": mode.value,
        "modelName": draw(names), "systemPromptHash": "s", "toolsetHash": "t",
    }
    if mode.durable:
        data["cursor"] = draw(cursors)
    return data


simple_envelope_mappings = plain_envelope_mappings()
"""Valid stored envelopes without metadata or loop messages: cheap to draw."""
unknown_schema_versions = json_ints.filter(lambda v: v != 1)


@st.composite
def envelopes_with_unknown_version(draw: st.DrawFn) -> dict[str, Any]:
    """A stored envelope that is valid in every respect but its integer ``schemaVersion``."""
    data = draw(simple_envelope_mappings)
    data["schemaVersion"] = draw(unknown_schema_versions)
    return data


NON_FINITE_TOKENS = ("NaN", "Infinity", "-Infinity", "1e400", "-1e999", "2E+308")
"""JSON-ish number tokens that Python's json module turns into NaN or an infinity."""
_PLACEHOLDER = "\x00placeholder\x00"


@st.composite
def envelope_texts_with_token(draw: st.DrawFn, tokens: st.SearchStrategy[str]) -> str:
    """A valid stored envelope as text, with one raw token spliced in as some value.

    The token lands in an envelope field, inside ``metadata`` or under an unknown key.
    """
    data = draw(simple_envelope_mappings)
    where = draw(st.sampled_from(("coversSeq", "metadata", "unknown", "cursor", "loopMessages")))
    if where == "metadata":
        data["metadata"] = {"x": [_PLACEHOLDER]}
    elif where == "loopMessages":
        data["loopMessages"] = [{"n": _PLACEHOLDER}]
    else:
        data[where] = _PLACEHOLDER
    text = json.dumps(data, ensure_ascii=False)
    return text.replace(json.dumps(_PLACEHOLDER), draw(tokens))


non_finite_envelope_texts = envelope_texts_with_token(st.sampled_from(NON_FINITE_TOKENS))
"""Stored envelopes whose text holds NaN, an infinity or an overflowing exponent."""
huge_integer_envelope_texts = envelope_texts_with_token(
    st.integers(min_value=400, max_value=6000).map(lambda digits: "7" * digits)
)
"""Stored envelopes whose text holds an integer of hundreds to thousands of digits."""


@st.composite
def envelope_mappings_with_value(draw: st.DrawFn, values: st.SearchStrategy[Any]) -> dict[str, Any]:
    """A valid stored mapping with one drawn Python value placed in a field or nested inside."""
    data = draw(simple_envelope_mappings)
    value = draw(values)
    where = draw(st.sampled_from(("coversSeq", "metadata", "unknown", "loopMessages")))
    if where == "metadata":
        data["metadata"] = {"nested": {"deeper": [value]}}
    elif where == "loopMessages":
        data["loopMessages"] = [{"n": value}]
    else:
        data[where] = value
    return data


non_finite_floats = st.sampled_from([float("nan"), float("inf"), float("-inf")])
huge_ints = st.integers(min_value=MAX_INT_BITS + 1, max_value=20_000).map(lambda bits: 2**bits - 1)


_DEEP_PREFIX = ('{"schemaVersion":1,"provider":"openai","mode":"responses","modelName":"m",'
                '"systemPromptHash":"s","toolsetHash":"t","cursor":"c","metadata":{"deep":')


def nested_text(depth: int, *, kind: str = "list") -> str:
    """A stored envelope whose metadata holds lists or objects nested ``depth`` levels deep."""
    inner = "[" * depth + "]" * depth if kind == "list" else '{"a":' * depth + "0" + "}" * depth
    return _DEEP_PREFIX + inner + "}}"


def nested_value(depth: int, *, kind: str = "dict") -> Any:
    """A Python value nested ``depth`` levels deep, built without recursion."""
    value: Any = 0
    for _ in range(depth):
        value = {"a": value} if kind == "dict" else [value]
    return value


# --------------------------------------------------------------------------------------
# Engine foundation: tools and contexts
# --------------------------------------------------------------------------------------

# Schemas are kept small and their scalars simple: toolset generation otherwise costs
# tens of milliseconds an example, and the hash properties run 500 of them each.
_property_names = st.text(min_size=1, max_size=4)
_schema_scalars = st.one_of(st.none(), st.booleans(), st.integers(-9, 9), st.text(max_size=3))
_schema_leaves = st.fixed_dictionaries(
    {"type": st.sampled_from(("string", "integer", "number", "boolean", "null"))},
    optional={
        "description": st.text(max_size=8),
        "enum": st.lists(_schema_scalars, max_size=2),
        "default": _schema_scalars,
        "minimum": st.integers(-9, 9),
    },
)


def _object_schemas(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"type": st.just("object"), "properties": st.dictionaries(_property_names, inner,
                                                                  max_size=2)},
        optional={
            "required": st.lists(_property_names, max_size=2, unique=True),
            "additionalProperties": st.booleans(),
        },
    )


def _compound_schemas(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    arrays = st.fixed_dictionaries({"type": st.just("array"), "items": inner})
    unions = st.lists(inner, min_size=1, max_size=2).map(lambda options: {"anyOf": options})
    return _object_schemas(inner) | arrays | unions


json_schemas = st.recursive(_schema_leaves, _compound_schemas, max_leaves=3)
"""JSON-schema-like values: typed leaves, objects, arrays and ``anyOf`` unions."""
parameter_schemas = _object_schemas(json_schemas)
"""What a tool's ``parameters`` is: an object schema."""
tool_specs = st.fixed_dictionaries(
    {"name": st.text(min_size=1, max_size=8), "description": st.text(max_size=12),
     "parameters": parameter_schemas}
)
"""``{name, description, parameters}`` mappings as ``toolset_hash`` takes them."""
toolsets = st.lists(tool_specs, max_size=4)


def key_shuffled(value: Any, rng: Random) -> Any:
    """A copy of ``value`` with the keys of every object, at every depth, in ``rng``'s order.

    Draw ``rng`` with ``st.randoms(use_true_random=True)``: one seeded draw shuffles
    everything, far cheaper than a permutation strategy per object (or a Random whose
    every call is a hypothesis draw).
    """
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: key_shuffled(item, rng) for key, item in items}
    if isinstance(value, list):
        return [key_shuffled(item, rng) for item in value]
    return value


def _json_nodes(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_json_nodes(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_json_nodes(item, (*path, index)))
    return found


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


@st.composite
def json_mutations(draw: st.DrawFn, value: Any) -> tuple[str, Any]:
    """One change anywhere inside ``value``: its canonical JSON always differs after it.

    Returns a label for the kind of change (for ``event``) and the changed copy.
    """
    changed = copy.deepcopy(value)
    path = draw(st.sampled_from(_json_nodes(changed)))
    node = _get(changed, path)
    if isinstance(node, dict):
        kinds = ("add key", "drop key", "rename key") if node else ("add key",)
        kind = draw(st.sampled_from(kinds))
        fresh = draw(_keys.filter(lambda k: k not in node))
        if kind == "add key":
            node[fresh] = draw(json_scalars)
        else:
            item = node.pop(draw(st.sampled_from(sorted(node))))
            if kind == "rename key":
                node[fresh] = item
    elif isinstance(node, list):
        kind = draw(st.sampled_from(("append item", "drop item") if node else ("append item",)))
        if kind == "append item":
            node.append(draw(json_scalars))
        else:
            del node[draw(st.integers(0, len(node) - 1))]
    else:
        kind = "replace scalar"
        other = draw(json_scalars.filter(lambda v: canonical_json(v) != canonical_json(node)))
        if not path:
            return kind, other
        _get(changed, path[:-1])[path[-1]] = other
    return kind, changed


PROVIDER_NAMES = ("openai", "gemini", "openai-compatible", "anthropic", "deepseek")
"""The providers of ``DEFAULT_REGISTRY``."""
hex_digests = st.binary(min_size=32, max_size=32).map(bytes.hex)
"""SHA-256-shaped hex digests (one bytes draw each: far cheaper than 64 characters)."""
small_names = st.sampled_from(["a", "b"])
"""A two-value alphabet: drawn twice, the values match half of the time."""
known_providers = st.sampled_from(PROVIDER_NAMES)
optional_seqs = st.none() | covers_seqs
optional_nows = st.none() | aware_datetimes


def turn_contexts(
    *,
    providers: st.SearchStrategy[str] = known_providers,
    models: st.SearchStrategy[str] = names,
    hashes: st.SearchStrategy[str] = hex_digests,
    committed_seqs: st.SearchStrategy[int | None] = optional_seqs,
    nows: st.SearchStrategy[datetime | None] = optional_nows,
) -> st.SearchStrategy[TurnContext]:
    """``TurnContext`` values for a known provider; narrow the parts to force matches."""
    return st.builds(
        TurnContext,
        provider=providers,
        model_name=models,
        system_prompt_hash=hashes,
        toolset_hash=hashes,
        committed_seq=committed_seqs,
        now=nows,
    )


# --- engine programs: turns, provider behaviour, toolsets ------------------------------
# Used by tests/properties/test_engine_model.py (scripted providers, MemoryStore).


def _engine_tools() -> dict[str, Any]:
    from tests.engine.support import forever, tool

    async def broken(_: dict[str, Any]) -> Any:
        raise RuntimeError("tool exploded")

    return {
        "weather": tool("weather"),
        "time": tool("time"),
        "broken": tool("broken", broken),
        "slow": tool("slow", forever, timeout=0.001),
        "weather_v2": tool("weather", parameters={"type": "object", "properties": {
            "city": {"type": "string"}, "unit": {"enum": ["C", "F"]}}}),
    }


TOOL_POOL = _engine_tools()
"""Tools a generated turn may offer; ``weather_v2`` is ``weather`` with an edited schema."""

ENGINE_MODELS = {
    "openai": ("gpt-4o", "gpt-4.1"),
    "gemini": ("gemini-2.5-flash", "gemini-2.5-pro"),
    "openai-compatible": ("gpt-4o-mini",),
    "anthropic": ("claude-sonnet-4-5", "claude-haiku-4-5"),
    "deepseek": ("deepseek-chat", "deepseek-v4-flash"),
}


@st.composite
def turn_settings(draw: st.DrawFn) -> dict[str, Any]:
    """Provider, model, system prompt and toolset of one turn (drawn so that they often
    stay the same and sometimes change, added, removed, reordered or edited)."""
    provider = draw(st.sampled_from(sorted(ENGINE_MODELS)))
    model = draw(st.sampled_from(ENGINE_MODELS[provider]))
    prompt = draw(st.sampled_from(["Be terse.", "Be terse.", "Be verbose."]))
    names = draw(st.lists(st.sampled_from(["weather", "time", "broken", "slow", "weather_v2"]),
                          unique_by=lambda n: TOOL_POOL[n].spec.name, max_size=4))
    tools = tuple(TOOL_POOL[name] for name in names)
    return {"provider": provider, "model": model, "prompt": prompt, "tools": tools}


@st.composite
def behaviours(draw: st.DrawFn) -> list[Any]:
    """A scripted provider's answers for one turn: replies, parallel tool calls (valid,
    invalid or failing), cursor rejection before or after tool results, transient and
    fatal failures, malformed frames."""
    from turnstate.emulators._scripted import ScriptStep

    rounds = draw(st.integers(0, 2))
    steps: list[Any] = []
    for _ in range(rounds):
        calls = draw(st.lists(st.tuples(
            st.sampled_from(["weather", "time", "broken", "slow", "missing"]),
            st.sampled_from(['{"city":"Oslo"}', "{}", "not json", '{"city": 5}'])),
            min_size=1, max_size=3))
        steps.append(ScriptStep.call(*calls))
    ending = draw(st.sampled_from(["reply", "reply", "reply", "reject_expired",
                                   "reject_invalid", "transient", "fatal", "malformed",
                                   "stream_error"]))
    steps.append({
        "reply": ScriptStep.reply("fine", chunks=2),
        "reject_expired": ScriptStep.reject_cursor("cursor_expired"),
        "reject_invalid": ScriptStep.reject_cursor("cursor_invalid"),
        "transient": ScriptStep.fail(503, "overloaded"),
        "fatal": ScriptStep.fail(400, "invalid_request_error"),
        "malformed": ScriptStep.malformed(),
        "stream_error": ScriptStep.stream_error(),
    }[ending])
    if ending.startswith("reject"):
        steps.append(ScriptStep.reply("after replay"))
    return steps


# --- providers: server-sent event streams ---------------------------------------------
# Used by tests/providers/test_sse.py: whole SSE streams (every field kind, comments,
# unknown fields, blank-line dispatch, LF / CRLF / CR line ends mixed, an optional BOM,
# non-ASCII text) and the ways the network may cut them into chunks.

_sse_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x00"),
    max_size=10,
)
_sse_line = st.one_of(
    st.tuples(st.just("data"), _sse_text),
    st.tuples(st.just("event"), _sse_text),
    st.tuples(st.just("id"), _sse_text),
    st.tuples(st.just("retry"), st.integers(min_value=0, max_value=10**6).map(str)),
    st.tuples(st.just(""), _sse_text),  # a comment line (":" + text)
    st.tuples(st.sampled_from(["foo", "Data", "dat"]), _sse_text),  # unknown fields
)
_sse_newline = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def sse_streams(draw: st.DrawFn) -> bytes:
    """A UTF-8 event stream of a few events, possibly starting with a BOM."""
    out = ["\ufeff"] if draw(st.booleans()) else []
    for block in draw(st.lists(st.lists(_sse_line, min_size=1, max_size=4), max_size=5)):
        for name, value in block:
            separator = ":" if name == "" else draw(st.sampled_from([": ", ":"]))
            out.append(name + separator + value + draw(_sse_newline))
        out.append(draw(_sse_newline))  # the blank line that dispatches
    return "".join(out).encode("utf-8")


_sse_block = st.one_of(
    # the shapes providers send, which the decoder's fast path takes
    st.tuples(st.tuples(st.just("event"), _sse_text),
              st.tuples(st.just("data"), _sse_text)).map(list),
    st.tuples(st.tuples(st.just("data"), _sse_text)).map(list),
    # anything else: the line parser's
    st.lists(_sse_line, min_size=0, max_size=4),
)


@st.composite
def sse_lf_streams(draw: st.DrawFn) -> bytes:
    """A stream with LF line ends only (what providers send), mostly made of the
    ``event:`` + ``data:`` and ``data:`` blocks, with odd blocks, empty blocks (extra
    blank lines) and an unfinished last event mixed in."""
    out = ["\ufeff"] if draw(st.booleans()) else []
    blocks = draw(st.lists(_sse_block, max_size=6))
    for block in blocks:
        for name, value in block:
            separator = ":" if name == "" else draw(st.sampled_from([": ", ":", ":  "]))
            out.append(name + separator + value + "\n")
        out.append("\n")
    for name, value in draw(st.lists(_sse_line, max_size=2)):  # an event left unfinished
        out.append(f"{name}: {value}\n")
    return "".join(out).encode("utf-8")


@st.composite
def chunkings(draw: st.DrawFn, data: bytes) -> list[bytes]:
    """``data`` cut at arbitrary byte positions, favouring the hard ones: right after a
    CR (between CR and LF) and inside a multi-byte UTF-8 character."""
    tricky = [i + 1 for i, byte in enumerate(data) if byte == 0x0D or byte >= 0x80]
    position = st.integers(min_value=0, max_value=len(data))
    if tricky:
        position = st.one_of(st.sampled_from(tricky), position)
    cuts = sorted(draw(st.sets(position, min_size=1, max_size=10)))
    bounds = [0, *cuts, len(data)]
    return [data[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]


# --------------------------------------------------------------------------------------
# Stateless providers: multi-turn DeepSeek conversations (prefix stability)
# --------------------------------------------------------------------------------------
#
# Plain data, so the section needs no imports of its own: a conversation is a list of
# turns; a turn is a dict with ``user_text``, ``tool_order`` (a permutation of
# ``range(PREFIX_TOOL_COUNT)``: the order the caller lists its tools in that turn),
# ``rounds`` (tool iterations: ``reasoning`` or None, ``text``, ``calls`` as
# ``(tool index, arguments JSON text)`` and one ``output`` per call) and ``final``
# (the answer: ``reasoning`` or None, ``text``).

PREFIX_TOOL_COUNT = 3
_prefix_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_prefix_reasoning = st.none() | st.text(st.characters(blacklist_categories=("Cs",)),
                                        min_size=1, max_size=16)


@st.composite
def _prefix_round(draw: st.DrawFn) -> dict[str, Any]:
    calls = draw(st.lists(st.tuples(st.integers(0, PREFIX_TOOL_COUNT - 1),
                                    _prefix_text.map(lambda q: json.dumps({"q": q}))),
                          min_size=1, max_size=3))
    return {"reasoning": draw(_prefix_reasoning), "text": draw(_prefix_text), "calls": calls,
            "outputs": [draw(_prefix_text) for _ in calls]}


@st.composite
def prefix_conversations(draw: st.DrawFn, max_turns: int = 4) -> list[dict[str, Any]]:
    """A conversation of 1..``max_turns`` turns, each with 0..2 tool rounds."""
    turns = []
    for _ in range(draw(st.integers(1, max_turns))):
        turns.append({
            "user_text": draw(_prefix_text),
            "tool_order": draw(st.permutations(range(PREFIX_TOOL_COUNT))),
            "rounds": draw(st.lists(_prefix_round(), max_size=2)),
            "final": {"reasoning": draw(_prefix_reasoning), "text": draw(_prefix_text)},
        })
    return turns


# --- live programs: providers, models and toolsets for tests/properties/test_live_model.py


LIVE_MODELS = (
    ("openai", "gpt-4o"), ("openai", "gpt-4.1"),
    ("gemini", "gemini-2.5-flash"), ("gemini", "gemini-2.5-pro"),
    ("openai-compatible", "gpt-4o-mini"), ("openai-compatible", "llama-3.3-70b"),
    ("deepseek", "deepseek-chat"), ("deepseek", "deepseek-v4-flash"),
    ("deepseek", "deepseek-reasoner"),
    ("anthropic", "claude-sonnet-4-5"), ("anthropic", "claude-haiku-4-5"),
)
"""(provider, model) pairs a live turn draws from: five providers, several models each."""

LIVE_TOOL_NAMES = ("weather", "time", "broken", "weather_v2")
"""``weather_v2`` is ``weather`` with an edited schema (same name)."""


def live_toolset(names: Sequence[str], *, evict: Any = None,
                 evict_from_call: int = 1) -> tuple[Any, ...]:
    """Tools for a live turn; with ``evict``, the ``evict_from_call``-th tool call (and
    every later one) makes that emulator forget every stored response: the cursor dies
    while that iteration's results are in flight."""
    from tests.engine.support import tool

    calls = [0]

    async def answer(args: dict[str, Any]) -> Any:
        calls[0] += 1
        if evict is not None and calls[0] >= evict_from_call:
            evict.evict_all()
        return {"ok": args}

    async def broken(_: dict[str, Any]) -> Any:
        raise RuntimeError("tool exploded")

    edited = {"type": "object", "properties": {"city": {"type": "string"},
                                               "unit": {"enum": ["C", "F"]}}}
    made = {
        "weather": tool("weather", answer),
        "time": tool("time", answer),
        "broken": tool("broken", broken),
        "weather_v2": tool("weather", answer, parameters=edited),
    }
    return tuple(made[name] for name in names)


@st.composite
def toolset_changes(draw: st.DrawFn, current: Sequence[str]) -> tuple[str, ...]:
    """One change to a toolset: a tool added or removed, the order shuffled, or the
    ``weather`` schema edited (or edited back)."""
    tools = list(current)
    kind = draw(st.sampled_from(["add", "remove", "reorder", "edit"]))
    spare = [n for n in LIVE_TOOL_NAMES if n not in tools
             and not ({n, *tools} >= {"weather", "weather_v2"})]
    if kind == "add" and spare:
        tools.insert(draw(st.integers(0, len(tools))), draw(st.sampled_from(spare)))
    elif kind == "remove" and tools:
        tools.pop(draw(st.integers(0, len(tools) - 1)))
    elif kind == "edit":
        swap = {"weather": "weather_v2", "weather_v2": "weather"}
        tools = [swap.get(n, n) for n in tools]
    else:
        tools = draw(st.permutations(tools))
    return tuple(tools)


# --------------------------------------------------------------------------------------
# Stateless providers: assistant message parts as plain tuples (JSON rendering checks)
# --------------------------------------------------------------------------------------
#
# ``("text", text)``, ``("call", call_id, name, arguments)``, ``("result", call_id,
# output, is_error)`` and ``("reasoning", provider, model, kind, text, signature, data)``;
# texts draw any character a JSON string can hold (quotes, backslashes, control
# characters, non-ASCII), arguments are JSON objects or arbitrary text.

_wire_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
_wire_arguments = st.one_of(
    st.dictionaries(_wire_text, st.one_of(_wire_text, st.integers(), st.floats(
        allow_nan=False, allow_infinity=False), st.booleans(), st.none()), max_size=3)
    .map(json.dumps),
    _wire_text,
)
_wire_part = st.one_of(
    st.tuples(st.just("text"), _wire_text),
    st.tuples(st.just("call"), _wire_text, _wire_text, _wire_arguments),
    st.tuples(st.just("result"), _wire_text, _wire_text, st.booleans()),
    st.tuples(st.just("reasoning"), st.sampled_from(["deepseek", "anthropic", "openai"]),
              st.sampled_from(["deepseek-v4-flash", "claude-sonnet-4-5", "other"]),
              st.sampled_from(["reasoning_content", "thinking", "redacted_thinking"]),
              _wire_text, st.none() | _wire_text, st.none() | _wire_text),
)
wire_part_lists = st.lists(_wire_part, max_size=8)
"""Assistant message parts in any order, as plain tuples."""


# --------------------------------------------------------------------------------------
# Storage: stored parts, and operation sequences run against two stores at once
# --------------------------------------------------------------------------------------
#
# Parts draw any character, lone surrogates included (a provider's ``\ud800`` escape
# decodes to one; the store must keep it). Operations are plain tuples interpreted by
# tests/storage/test_equivalence.py; lease indexes pick among the leases taken so far.

_stored_text = st.text(st.characters(exclude_categories=()), max_size=12)
_stored_name = st.text(max_size=6)


def _citations() -> st.SearchStrategy[Any]:
    """A citation, every optional field set or None (wire6)."""
    from turnstate.core._citations import Citation

    optional = st.none() | _stored_text
    count = st.none() | st.integers(min_value=0, max_value=2**40)
    return st.builds(Citation, kind=_stored_name, url=optional, title=optional, start=count,
                     end=count, cited_text=optional, source_id=optional, source_start=count,
                     source_end=count)


def stored_parts() -> st.SearchStrategy[Any]:
    """Every part kind, optional fields set or None, texts of any characters."""
    from turnstate.core._conversation import (
        OpaquePart,
        ReasoningPart,
        TextPart,
        ToolCallPart,
        ToolResultPart,
        TransitionPart,
    )

    optional = st.none() | _stored_text
    return st.one_of(
        st.builds(TextPart, text=_stored_text, phase=optional,
                  citations=st.just(()) | st.lists(_citations(), min_size=1,
                                                   max_size=2).map(tuple)),
        st.builds(OpaquePart, provider=_stored_name, model=_stored_name, kind=_stored_name,
                  raw=_stored_text),
        st.builds(ReasoningPart, provider=_stored_name, model=_stored_name, kind=_stored_name,
                  text=_stored_text, signature=optional, data=optional),
        st.builds(ToolCallPart, call_id=_stored_name, name=_stored_name, arguments=_stored_text,
                  provider=_stored_name, model=_stored_name, signature=optional),
        st.builds(ToolResultPart, call_id=_stored_name, name=_stored_name, output=_stored_text,
                  is_error=st.booleans()),
        st.builds(TransitionPart, reason=_stored_name, strategy=_stored_name,
                  source_state=_stored_name, recovered=st.booleans()),
        media_parts(),
    )


def media_parts() -> st.SearchStrategy[Any]:
    """Images and PDFs, inline (any bytes, or a PNG header of any size) or by URL."""
    from turnstate.core._media import IMAGE_TYPES, FilePart, ImagePart

    sizes = st.integers(min_value=1, max_value=5_000)
    png = st.builds(lambda w, h, tail: b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"
                    + w.to_bytes(4, "big") + h.to_bytes(4, "big") + tail,
                    sizes, sizes, st.binary(max_size=8))
    data = st.binary(min_size=1, max_size=64) | png
    urls = st.builds("https://example.com/{}".format, _stored_name)
    media_types = st.sampled_from(sorted(IMAGE_TYPES))
    return st.one_of(
        st.builds(ImagePart, media_type=media_types, data=data),
        st.builds(ImagePart, media_type=st.none() | media_types, url=urls),
        st.builds(FilePart, data=data | st.builds(b"%PDF /Type /Page ".__mul__,
                                                  st.integers(1, 4)),
                  filename=st.none() | _stored_text),
        st.builds(FilePart, url=urls),
    )


_chat_ids = st.sampled_from(["a", "b"])
_lease_picks = st.integers(min_value=0, max_value=7)
_begins = st.tuples(st.just("begin"), _chat_ids, st.sampled_from([30.0, 600.0]))
_commits = st.tuples(st.just("commit"), _lease_picks,
                     st.sampled_from(["cursor", "cursor", "none", "blank", "loop"]))
store_operations = st.lists(
    st.one_of(
        _begins, _commits, _begins, _commits,  # listed twice: turns are what matters most
        st.tuples(st.just("create"), _chat_ids),
        st.tuples(st.just("transition"), _lease_picks, st.booleans()),
        st.tuples(st.just("abort"), _lease_picks, st.booleans()),
        st.tuples(st.just("edit"), _chat_ids, st.integers(min_value=0, max_value=6)),
        st.tuples(st.just("delete"), _chat_ids, st.integers(min_value=0, max_value=6)),
        st.tuples(st.just("clear"), _chat_ids),
        st.tuples(st.just("advance"), st.sampled_from([1.0, 29.0, 700.0])),
        st.tuples(st.just("reclaim")),
    ),
    min_size=1,
    max_size=25,
)
"""Sequences of store operations on chats ``a`` and ``b`` (the test first creates both and
begins a turn on ``a``; lease picks index the leases taken so far)."""


# --------------------------------------------------------------------------------------
# Wire fidelity: streams of known and unknown blocks (tests/providers/test_wire_property.py)
# --------------------------------------------------------------------------------------
#
# A segment is ``("text", pieces)``, ``("call", name, arguments object)``,
# ``("opaque", kind, payload)`` (a block or item the codec does not model) or
# ``("event", name)`` (an event type nobody knows, ignored wherever it falls).

_wire_piece = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=6)
_json_leaf = st.none() | st.booleans() | st.integers(-5, 5) | _wire_piece
_opaque_payload = st.dictionaries(st.sampled_from(["id", "query", "status", "data"]),
                                  _json_leaf, max_size=3)
wire_segments = st.lists(
    st.one_of(
        st.tuples(st.just("text"), st.lists(_wire_piece, min_size=1, max_size=4)),
        st.tuples(st.just("call"), st.sampled_from(["weather", "get_time"]),
                  st.dictionaries(st.sampled_from(["city", "n"]), _json_leaf, max_size=2)),
        st.tuples(st.just("opaque"),
                  st.sampled_from(["server_tool_use", "web_search_tool_result", "future_block"]),
                  _opaque_payload),
        st.tuples(st.just("event"), st.sampled_from(["future_event", "telemetry"])),
    ),
    max_size=8,
)
"""One response's content as segments, known and unknown mixed."""


# --------------------------------------------------------------------------------------
# PostgreSQL text codec: any code point (NUL, lone surrogates and U+FFFE included), and
# the marker's neighbours, which the codec must not confuse with its own escapes
# --------------------------------------------------------------------------------------

pg_awkward_text = st.text(
    st.one_of(st.characters(exclude_categories=()),
              st.sampled_from(["\x00", "\ufffe", "\ud800", "\udfff", "\\", "u", "0", "f", "e",
                               '"'])),
    max_size=16)
"""Texts the PostgreSQL codec must store and give back unchanged."""


# --------------------------------------------------------------------------------------
# OpenAI Responses delta frames: the dispatcher's fast path against its full path
# --------------------------------------------------------------------------------------

RESPONSES_DELTA_NAMES = (
    "response.output_text.delta", "response.refusal.delta",
    "response.reasoning_summary_text.delta", "response.reasoning_text.delta",
    "response.function_call_arguments.delta")
_responses_other_names = ("response.output_item.added", "response.output_text.done",
                          "response.completed", "error", "response.content_part.added",
                          "message", "")
_delta_text = st.text(
    st.one_of(st.characters(exclude_categories=()),
              st.sampled_from(['"', "\\", "/", "\n", "\t", "\x00", "\ud800", "\udfff", "é",
                               "\U0001f600", "\u2028"])),
    max_size=12)
_odd_value = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(0, 2),
                       _delta_text, st.just([]), st.just({"a": 1}))


@st.composite
def responses_delta_frame(draw: st.DrawFn) -> tuple[str, str]:
    """One ``(event name, data)`` frame, mostly a delta as the API sends it, with its
    fields in any order, extra fields, any text (escapes, unicode, lone surrogates,
    ``ensure_ascii`` either way), odd whitespace; sometimes a type that does not match
    the name, odd field values, or malformed data."""
    def usual(common: st.SearchStrategy[Any]) -> Any:
        """Mostly ``common``, now and then an odd value."""
        return draw(common if draw(st.integers(0, 5)) else _odd_value)

    name = draw(st.sampled_from(RESPONSES_DELTA_NAMES) if draw(st.integers(0, 5))
                else st.sampled_from(_responses_other_names))
    fields: dict[str, Any] = {
        "type": usual(st.just(name) if draw(st.integers(0, 5))
                      else st.sampled_from(RESPONSES_DELTA_NAMES)),
        "output_index": usual(st.integers(0, 2)),
        "delta": usual(_delta_text),
        "item_id": draw(st.sampled_from(["msg_1", "fc_1", "rs_1"])),
    }
    for extra in draw(st.lists(st.sampled_from(
            ["sequence_number", "content_index", "logprobs", "obfuscation", "summary_index",
             "item"]), max_size=3, unique=True)):
        fields[extra] = draw(_odd_value)
    if not draw(st.integers(0, 7)):  # a field missing
        del fields[draw(st.sampled_from(list(fields)))]
    keys = draw(st.permutations(list(fields)))
    if not draw(st.integers(0, 5)):  # a key twice: JSON keeps the last
        keys = [*keys, draw(st.sampled_from(list(fields)))]
    space = draw(st.sampled_from(["", " ", "\n", " \t"]))
    ascii_only = draw(st.booleans())
    data = "{" + ("," + space).join(
        json.dumps(key) + ":" + space + json.dumps(fields[key],
                                                   ensure_ascii=ascii_only)
        for key in keys) + "}"
    data = draw(st.sampled_from(["{}", "{}{}", " {} ", "{}\n", "[{}]", "{}x"])).replace(
        "{}", data, 1) if draw(st.integers(0, 5)) == 0 else data
    if draw(st.integers(0, 7)) == 0:  # malformed: cut short, or [DONE]
        data = draw(st.sampled_from([data[:len(data) // 2], "[DONE]", data + ",", ""]))
    return name, data


@st.composite
def responses_delta_streams(draw: st.DrawFn) -> list[tuple[str, str]]:
    """A few items added (some typed, some not), then delta frames."""
    frames: list[tuple[str, str]] = []
    for index in draw(st.lists(st.integers(0, 2), max_size=3)):
        item = draw(st.sampled_from([{"type": "message"}, {"type": "function_call"},
                                     {"type": "reasoning"}, {"id": "x"}]))
        frame = {"type": "response.output_item.added", "output_index": index, "item": item}
        frames.append(("response.output_item.added", json.dumps(frame)))
    frames += draw(st.lists(responses_delta_frame(), min_size=1, max_size=8))
    return frames


# --------------------------------------------------------------------------------------
# PostgreSQL DSNs as a user mistypes them (tests/storage/test_rough9_dsn.py): hosts with
# an unbalanced bracket, ports past 65535 or no number, several hosts, stray ``@`` and
# ``%``, query parameters asyncpg reads. ``DSN_PASSWORD`` is the password every DSN with
# one carries, so a test can check no error prints it.
# --------------------------------------------------------------------------------------

DSN_PASSWORD = "pw-s3cret-4711"
_DSN_USERS = st.sampled_from(["", "ann@", f"ann:{DSN_PASSWORD}@", f":{DSN_PASSWORD}@",
                              f"a@b:{DSN_PASSWORD}@", f"ann:{DSN_PASSWORD}[@"])
_DSN_BROKEN_HOSTS = ["[::1", "::1]", "[", "]", "[::1]x", "h%zz", "[v1.x]", "a b", "h\x00"]
_DSN_BAD_PORTS = st.one_of(
    st.integers(min_value=65_536, max_value=2**70).map(str),
    st.sampled_from(["abc", "-1", "1e3", " 80", "\u0663", "80]", "+5"]))
_DSN_QUERY_KEYS = ["schema", "sslmode", "connect_timeout", "password", "user", "x"]
_DSN_QUERY = st.lists(
    st.tuples(st.sampled_from(_DSN_QUERY_KEYS), st.text(max_size=6)), max_size=3).map(
    lambda pairs: "?" + "&".join(f"{k}={v}" for k, v in pairs) if pairs else "")
_DSN_PATHS = st.sampled_from(["", "/", "/test", "/a/b", "/%zz", "/t?"])


def dsns(closed_port: int) -> st.SearchStrategy[str]:
    """``postgresql://`` DSNs whose hosts are this machine (``127.0.0.1``, ``[::1]``,
    ``localhost``) on ``closed_port``, a port past 65535 or no number, or a host that
    cannot be one; never an empty port (the default, 5432: a real server), so opening one
    is refused at once (the test also points libpq's defaults, ``PGPORT``, at the closed
    port)."""
    good = st.sampled_from(["127.0.0.1", "[::1]", "localhost"])
    port = st.one_of(st.just(str(closed_port)), _DSN_BAD_PORTS)
    host = st.one_of(st.tuples(good, port).map(lambda hp: f"{hp[0]}:{hp[1]}"),
                     st.sampled_from(_DSN_BROKEN_HOSTS).map(lambda h: f"{h}:{closed_port}"))
    hosts = st.lists(host, min_size=1, max_size=3).map(",".join)
    return st.builds(lambda scheme, user, where, path, query: (
        f"{scheme}{user}{where}{path}{query}"),
        st.sampled_from(["postgresql://", "postgres://"]), _DSN_USERS, hosts, _DSN_PATHS,
        _DSN_QUERY)


any_dsns = st.builds(lambda scheme, user, rest: f"{scheme}{user}{rest}",
                     st.sampled_from(["postgresql://", "postgres://"]), _DSN_USERS,
                     st.text(alphabet=st.characters(codec="utf-8"), max_size=30) | st.text(
                         alphabet="[]:@/?#%,=&.0123456789abcdef", max_size=30))
"""Any text after a PostgreSQL scheme (and a user part): the parser's own fuzz."""
