"""What an Anthropic stream's or body's fields mean: usage (cumulative in a stream),
the compaction step's own cost, and error objects classified by their type (shared by
the stream parser and the body reader, ``_stream``)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from turnstate.core._conversation import Usage
from turnstate.core._errors import (
    FatalProviderError,
    ProviderError,
    RateLimited,
    TransientProviderError,
)
from turnstate.core._json import JsonObject
from turnstate.providers._frames import int_field, object_of, text_of


class _Block(Protocol):
    """A content block as the stream parser keeps it (``_stream._Block``): its type and
    the object it started with."""

    kind: str
    start: JsonObject

logger = logging.getLogger("turnstate")

TRANSIENT_TYPES = frozenset({"overloaded_error", "api_error", "timeout_error"})
BUG_MARKERS = (
    "`tool_use` ids were found without `tool_result` blocks",
    "unexpected `tool_use_id` found in `tool_result` blocks",
    "invalid `signature` in `thinking` block",
    "expected `thinking` or `redacted_thinking`",
    "`thinking` blocks in the latest assistant message cannot be modified",
)


def log_if_bug(provider: str, detail: str) -> None:
    """Log a 400 that shows turnstate built a request the API's rules forbid."""
    lowered = detail.lower()
    if any(marker.lower() in lowered for marker in BUG_MARKERS):
        logger.error("[provider][bug] %s rejected a request turnstate built: %s",
                     provider, detail)


def error_from_type(provider: str, fields: JsonObject, status: int | None = None) -> ProviderError:
    """An ``error`` object (``{type, message}``) classified by its type."""
    kind = text_of(fields.get("type"))
    detail = text_of(fields.get("message")) or kind or "error"
    if kind == "rate_limit_error":
        return RateLimited(provider, detail, status=status, code=kind)
    if kind in TRANSIENT_TYPES:
        return TransientProviderError(provider, detail, status=status, code=kind)
    if kind == "invalid_request_error":
        log_if_bug(provider, detail)
    return FatalProviderError(provider, detail, status=status, code=kind)


def read_usage(raw: JsonObject) -> Usage:
    """Anthropic usage → engine usage: input counts every input token the model saw.

    The writes' one-hour part (``cache_creation.ephemeral_1h_input_tokens``, billed at 2x
    the input rate, the five-minute ones at 1.25x) is read apart, never more than the
    writes (a usage that reports no split leaves it 0: the policy's lifetime prices
    them)."""
    cache_read = int_field(raw.get("cache_read_input_tokens"))
    cache_write = int_field(raw.get("cache_creation_input_tokens"))
    split = raw.get("cache_creation")
    one_hour = int_field(split.get("ephemeral_1h_input_tokens")) \
        if cache_write and type(split) is dict else 0
    return Usage(
        input_tokens=int_field(raw.get("input_tokens")) + cache_read + cache_write,
        output_tokens=int_field(raw.get("output_tokens")),
        cached_input_tokens=cache_read,
        cache_write_tokens=cache_write,
        cache_write_1h_tokens=min(one_hour, cache_write),
        reasoning_tokens=int_field(object_of(raw.get("output_tokens_details")).get("thinking_tokens")),
    )


def merge_usage(usage: JsonObject, delta: JsonObject) -> None:
    """Fold a ``message_delta``'s usage into ``usage``: the counts are cumulative, so
    the last value wins, but a null one (``MessageDeltaUsage`` types the input and
    cache counts as nullable) keeps what ``message_start`` said, as the SDK's
    accumulator does."""
    for key, value in delta.items():
        if value is not None:
            usage[key] = value


def compaction_metadata(blocks: Iterable[_Block], usage: JsonObject) -> JsonObject:
    """``compacted`` when a compaction block came, and what the compaction itself cost
    (``usage.iterations`` entries of type ``compaction``: not in the top-level usage,
    which counts the compacted context the answer was sampled from)."""
    if not any(block.kind == "compaction" and text_of(block.start.get("content"))
               for block in blocks):
        return {}
    metadata: JsonObject = {"compacted": True}
    spent = compaction_iterations(usage)
    if spent:
        metadata["compactionUsage"] = {
            "inputTokens": sum(int_field(i.get("input_tokens")) for i in spent),
            "outputTokens": sum(int_field(i.get("output_tokens")) for i in spent)}
    return metadata


def compaction_iterations(usage: JsonObject) -> list[JsonObject]:
    """The ``usage.iterations`` entries of type ``compaction``: the summarising steps."""
    iterations = usage.get("iterations")
    if not isinstance(iterations, list):
        return []
    return [i for i in iterations if isinstance(i, dict) and i.get("type") == "compaction"]


def compaction_usage(usage: JsonObject) -> Usage | None:
    """What the summarising steps billed, each entry read as a top-level usage is (its
    uncached input, cache reads and writes, output), added up; None when none ran. Billed
    whether or not the block came back with a summary (a failed compaction still ran)."""
    spent = compaction_iterations(usage)
    if not spent:
        return None
    total = read_usage(spent[0])
    for entry in spent[1:]:
        total += read_usage(entry)
    return total
