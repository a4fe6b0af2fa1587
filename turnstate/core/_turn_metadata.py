"""A turn's audit metadata out of its responses' metadata: how each key adds up.

A turn of several requests (a tool loop, a replay after a lost cursor) gets one
``metadata`` per response; the turn's audit holds them merged. A count is the turn's
sum, not its last request's (``droppedOutput`` of a Gemini loop whose every answer
streamed an image said 1); a list is every request's entries; anything else is the
latest response's word (its ``stopDetails``, its ``serviceTier``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from turnstate.core._cost import SERVER_TOOL_CALLS
from turnstate.core._json import JsonObject

SUMMED = frozenset({SERVER_TOOL_CALLS, "promptCacheHitTokens", "promptCacheMissTokens"})
"""Counts (whole numbers) the turn adds up: calls of the provider's own tools (Anthropic,
OpenAI Responses, Gemini), DeepSeek's cache hit and miss tokens."""
SUMMED_BY_NAME = frozenset({"droppedOutput", "compactionUsage"})
"""Counts by name the turn adds up name by name: Gemini's model output no part holds
(``{"image": 2}``), what Anthropic's compaction steps read and wrote."""
JOINED = frozenset({"droppedToolCalls", "compactionItemIds"})
"""Lists the turn keeps every request's entries of, in order."""
UNITED = frozenset({"serverRefusedFields"})
"""Sorted lists of names the turn keeps each name of once (the fields a Chat
Completions server refused)."""


def merge_metadata(turn: JsonObject, response: Mapping[str, Any]) -> None:
    """Fold one response's ``metadata`` into the turn's (in place): ``SUMMED`` and
    ``SUMMED_BY_NAME`` counts added, ``JOINED`` lists joined, ``UNITED`` names united,
    any other key the response's. A value of an unexpected type is the response's, as
    any other key (never a failure of the turn over its audit)."""
    for key, value in response.items():
        before = turn.get(key)
        if before is None:
            turn[key] = value
        elif key in SUMMED and _count(before) and _count(value):
            turn[key] = before + value
        elif key in SUMMED_BY_NAME and isinstance(before, dict) and isinstance(value, dict):
            turn[key] = _added(before, value)
        elif key in JOINED and isinstance(before, list) and isinstance(value, list):
            turn[key] = [*before, *value]
        elif key in UNITED and isinstance(before, list) and isinstance(value, list):
            turn[key] = sorted({*before, *value}, key=str)
        else:
            turn[key] = value


def _count(value: object) -> bool:
    return type(value) is int


def _added(before: Mapping[str, Any], value: Mapping[str, Any]) -> JsonObject:
    """Two counts by name added name by name (names in sorted order, as the parsers
    write them); a name whose counts are not whole numbers takes the response's."""
    total: JsonObject = dict(before)
    for name, count in value.items():
        earlier = total.get(name)
        total[name] = earlier + count if _count(earlier) and _count(count) else count
    return dict(sorted(total.items()))
