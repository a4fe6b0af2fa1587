"""A commit's typed columns written out: usage, context snapshot, audit state and the kept
provider state (the envelope), each by a fast path tested equal to the converter's JSON."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from turnstate.core._context import ContextSnapshot, Severity, TokenSource
from turnstate.core._conversation import AuditState, Usage
from turnstate.core._convert import format_utc
from turnstate.core._envelope import ContinuationEnvelope, serialize_envelope
from turnstate.storage._records import (
    _NOT_ENCODED,
    T,
    _converter,
    _dump,
    _encode,
    _quote,
    utf8_safe,
)

_USAGE_TEXT = ('{"inputTokens":%d,"outputTokens":%d,"cachedInputTokens":%d,'
               '"reasoningTokens":%d,"cacheHitTokens":%s,"cacheMissTokens":%s,'
               '"cacheWriteTokens":%d}')
"""``_usage_tree``'s JSON for counts that are plain ints (or None where optional): one
``%``-format, a third of the tree's encoding (issue 26: once per commit)."""


def encode_usage(usage: Usage | None) -> str | None:
    if usage is None:
        return None
    a, b, c, d = (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens,
                  usage.reasoning_tokens)
    hit, miss, w = usage.cache_hit_tokens, usage.cache_miss_tokens, usage.cache_write_tokens
    if (type(a) is int and type(b) is int and type(c) is int and type(d) is int
            and type(w) is int and usage.cache_write_1h_tokens == 0
            and (hit is None or type(hit) is int)
            and (miss is None or type(miss) is int)):  # no one-hour writes: no such key
        try:
            return _USAGE_TEXT % (a, b, c, d, "null" if hit is None else hit,
                                  "null" if miss is None else miss, w)
        except ValueError:  # a count of more digits than an int's text may have: the
            pass  # tree refuses it as before (a StorageError, not this ValueError)
    return _ascii_tree_or_converted(usage, _usage_tree, "usage")  # a bool, a float, ...


_CONTEXT_TEXT = ('{"estimatedInputTokens":%d,"contextLimit":%d,"estimatedUsageRatio":%r,'
                 '"severity":"%s","source":"%s"}')
"""``_context_tree``'s JSON for int counts and a finite float ratio (the encoder writes a
float as its ``repr``), in one ``%``-format (issue 26: once per commit)."""


def encode_context(snapshot: ContextSnapshot | None) -> str | None:
    if snapshot is None:
        return None
    tokens, limit, ratio = (snapshot.estimated_input_tokens, snapshot.context_limit,
                            snapshot.estimated_usage_ratio)
    if (type(tokens) is int and type(limit) is int and type(ratio) is float
            and math.isfinite(ratio) and snapshot.dropped_history_chars == 0):
        severity, source = snapshot.severity, snapshot.source
        if type(severity) is Severity and type(source) is TokenSource:
            try:
                return _CONTEXT_TEXT % (tokens, limit, ratio, severity._value_, source._value_)
            except ValueError:  # a count of more digits than an int's text may have: the
                pass  # tree refuses it as before
    return _ascii_tree_or_converted(snapshot, _context_tree, "context snapshot")


def _ascii_tree_or_converted(value: T, tree: Callable[[T], object], what: str) -> str:
    """``value``'s fast tree encoded (ASCII only: no surrogate to escape), or the
    converter's answer when the tree does not encode."""
    try:
        return _encode(tree(value))
    except _NOT_ENCODED:
        return _dump(_converter.unstructure(value), what)


_AUDIT_TEXT = ('{"provider":%s,"modelName":%s,"strategy":%s,"systemPromptHash":%s,'
               '"toolsetHash":%s,"cursor":%s,"reason":%s,"metadata":%s}')
"""``_audit_tree``'s JSON: its fields' values, each written by ``_quote`` or ``_encode``,
in one ``%``-format (issue 26: the tree's keys and its dict cost more than the values)."""


def encode_audit(audit: AuditState | None) -> str | None:
    if audit is None:
        return None
    try:
        try:  # ``_encode(_audit_tree(audit))`` without the tree (tested equal)
            cursor, reason = audit.cursor, audit.reason
            text = _AUDIT_TEXT % (
                _quote(audit.provider), _quote(audit.model_name), _quote(audit.strategy),
                _quote(audit.system_prompt_hash), _quote(audit.toolset_hash),
                "null" if cursor is None else _quote(cursor),
                "null" if reason is None else _quote(reason), _encode(audit.metadata))
        except _NOT_ENCODED:  # a field of another type: the tree's answer, or its error
            text = _encode(_audit_tree(audit))
        return utf8_safe(text)
    except _NOT_ENCODED:
        # metadata holding what only the converter turns into JSON (a datetime, a
        # record), or what is no JSON at all: the converter's answer, or its error
        return _dump(_converter.unstructure(audit), "audit state")


_ENVELOPE_HEAD = ('{"schemaVersion":%d,"provider":%s,"mode":%s,"modelName":%s,'
                  '"systemPromptHash":%s,"toolsetHash":%s')
"""The envelope's first fields, always written (``envelope_text``)."""


def envelope_text(envelope: ContinuationEnvelope) -> str:
    """``serialize_envelope`` of a state ``decide_turn_persistence`` kept, written out
    (tested equal): the envelope's fields, None ones left out, ``schemaVersion`` first."""
    if envelope.loop_messages is not None:
        return serialize_envelope(envelope)
    # Written out without a dict (tested equal): each value by ``_quote`` or ``_encode``,
    # the schema version and ``coversSeq`` by ``%d`` when they are ints; a field of
    # another type takes the dict's answer, or its error.
    version, seq = envelope.schema_version, envelope.covers_seq
    if type(version) is not int or not (seq is None or type(seq) is int):
        return _envelope_dict_text(envelope)
    try:
        text = _ENVELOPE_HEAD % (version, _quote(envelope.provider),
                                 _quote(envelope.mode._value_), _quote(envelope.model_name),
                                 _quote(envelope.system_prompt_hash),
                                 _quote(envelope.toolset_hash))
        if envelope.cursor is not None:
            text += ',"cursor":' + _quote(envelope.cursor)
        if envelope.created_at is not None:
            text += ',"createdAt":' + _quote(format_utc(envelope.created_at))
        if seq is not None:
            text += f',"coversSeq":{seq:d}'
        if envelope.metadata is not None:
            text += ',"metadata":' + _encode(envelope.metadata)
    except _NOT_ENCODED:
        return _envelope_dict_text(envelope)
    return text + "}"


def _envelope_dict_text(envelope: ContinuationEnvelope) -> str:
    """``envelope_text`` by encoding the envelope's fields as a dict (what a field of
    another type than the written-out text takes)."""
    data: dict[str, Any] = {
        "schemaVersion": envelope.schema_version, "provider": envelope.provider,
        "mode": envelope.mode._value_, "modelName": envelope.model_name,
        "systemPromptHash": envelope.system_prompt_hash, "toolsetHash": envelope.toolset_hash}
    if envelope.cursor is not None:
        data["cursor"] = envelope.cursor
    if envelope.created_at is not None:
        data["createdAt"] = format_utc(envelope.created_at)
    if envelope.covers_seq is not None:
        data["coversSeq"] = envelope.covers_seq
    if envelope.metadata is not None:
        data["metadata"] = envelope.metadata
    try:
        return _encode(data)
    except _NOT_ENCODED:
        return serialize_envelope(envelope)  # its answer, or its error (a cycle included)


def _usage_tree(usage: Usage) -> dict[str, Any]:
    return {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
            "cachedInputTokens": usage.cached_input_tokens,
            "reasoningTokens": usage.reasoning_tokens,
            "cacheHitTokens": usage.cache_hit_tokens,
            "cacheMissTokens": usage.cache_miss_tokens,
            "cacheWriteTokens": usage.cache_write_tokens,
            **({"cacheWrite1hTokens": usage.cache_write_1h_tokens}
               if usage.cache_write_1h_tokens != 0 else {})}


def _context_tree(snapshot: ContextSnapshot) -> dict[str, Any]:
    tree = {"estimatedInputTokens": snapshot.estimated_input_tokens,
            "contextLimit": snapshot.context_limit,
            "estimatedUsageRatio": snapshot.estimated_usage_ratio,
            "severity": snapshot.severity._value_, "source": snapshot.source._value_}
    if snapshot.dropped_history_chars:
        tree["droppedHistoryChars"] = snapshot.dropped_history_chars
    return tree


def _audit_tree(audit: AuditState) -> dict[str, Any]:
    """The metadata goes to the encoder as it is: plain JSON encodes to the text the
    converter's copy would; anything else fails there and takes the converter's path."""
    return {"provider": audit.provider, "modelName": audit.model_name,
            "strategy": audit.strategy, "systemPromptHash": audit.system_prompt_hash,
            "toolsetHash": audit.toolset_hash, "cursor": audit.cursor,
            "reason": audit.reason, "metadata": audit.metadata}
