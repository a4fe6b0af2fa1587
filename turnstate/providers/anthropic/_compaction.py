"""Anthropic server-side compaction: what a request asks for and what it sends back.

The request (threshold compaction, beta ``compact-2026-01-12``): the header
``anthropic-beta: compact-2026-01-12`` and ``"context_management": {"edits":
[{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": N}}]}``, sent
when the call's settings enable provider compaction and the registry flags the model
(``ModelInfo.compaction``). ``N`` is the settings' threshold (80% of the context limit
unless ``compact_threshold`` says otherwise), never below the API's minimum of 50,000.
The SDK types these as ``BetaContextManagementConfigParam`` /
``BetaCompact20260112EditParam``.

When input tokens reach ``N`` the API summarises the conversation, streams a
``compaction`` block first in the answer (``content`` and ``encrypted_content`` null
at ``content_block_start``, their values in one ``compaction_delta``) and samples the
answer from the summary. The next request sends the block back in its place; the API
drops every block before it, so turnstate leaves those out (``_codec.messages_json``).

A block goes back as received, except for keys whose value is null: a round-tripped
``encrypted_content: null`` is refused ("Extra inputs are not permitted",
anthropic-sdk-python#1828). A block without a summary (``content`` null or empty: a
failed compaction, a no-op for the API, and an empty one is refused with "content
can't be empty") is not sent at all.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from turnstate.core._compaction import (
    COMPACTION_KIND,
    compaction_payload,
    history_from_compaction,
)
from turnstate.core._conversation import OpaquePart
from turnstate.core._json import JsonObject
from turnstate.providers._protocol import ProviderCall

BETA = "compact-2026-01-12"
STRATEGY = "compact_20260112"
MIN_TRIGGER_TOKENS = 50_000
"""The smallest ``trigger.value`` the API accepts."""


def wants_compaction(call: ProviderCall) -> bool:
    """The settings allow provider compaction and the model supports it."""
    return call.settings.provider_compaction_enabled and call.model.compaction


def sends_compaction(call: ProviderCall, provider: str) -> bool:
    """The request carries a compaction block back (this turn's loop made one, or the
    history has a compaction point of this provider and model). The block is a beta
    param (``BetaCompactionBlockParam``; the GA ``MessageCreateParams`` has none), so
    such a request names the beta even when it asks for no compaction itself."""
    return (loop_from_compaction(call.loop_messages) is not None or history_from_compaction(
        call.history, provider, call.model.name) is not None)


def trigger_tokens(call: ProviderCall) -> int:
    """The ``input_tokens`` trigger: the settings' threshold, at least the API minimum."""
    return max(MIN_TRIGGER_TOKENS, call.settings.threshold_for(call.model.context_limit))


def context_management(call: ProviderCall) -> JsonObject:
    """The request's ``context_management`` object for threshold compaction."""
    edit = {"type": STRATEGY, "trigger": {"type": "input_tokens", "value": trigger_tokens(call)}}
    return {"edits": [edit]}


def compaction_block(part: OpaquePart) -> JsonObject | None:
    """The block to send back: as received, null-valued keys left out; None for a failed
    compaction (no summary)."""
    if compaction_payload(part) is None:
        return None
    block = json.loads(part.raw)
    return {key: value for key, value in block.items() if value is not None}


def _loop_compaction_at(message: JsonObject) -> int | None:
    """The index of the last compaction block of an assistant loop message, or None."""
    content = message.get("content")
    if message.get("role") != "assistant" or not isinstance(content, list):
        return None
    for index in range(len(content) - 1, -1, -1):
        block = content[index]
        if isinstance(block, dict) and block.get("type") == COMPACTION_KIND \
                and isinstance(block.get("content"), str) and block["content"]:
            return index
    return None


def loop_from_compaction(loop: Sequence[JsonObject]) -> list[JsonObject] | None:
    """This turn's loop messages from its latest compaction block on (the message that
    holds it trimmed to start there), or None when the loop made no compaction. The
    loop only ever holds this turn's provider and model's blocks."""
    for index in range(len(loop) - 1, -1, -1):
        at = _loop_compaction_at(loop[index])
        if at is not None:
            head = {**loop[index], "content": loop[index]["content"][at:]}
            return [head, *loop[index + 1:]]
    return None
