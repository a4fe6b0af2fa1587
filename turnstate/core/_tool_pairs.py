"""Replayed history's tool calls and results, sent in pairs only.

A committed answer keeps each tool call with its result in the same assistant message
(the engine appends both; a call it never ran, cut by a ``length`` stop, is not kept).
An embedder's ``edit_message`` of an answer can still leave one without the other (the
call kept, its result dropped, or the reverse), and every provider refuses such a
request with a 400 (Anthropic: a ``tool_use`` without its ``tool_result``; OpenAI: a
``function_call`` without its output; Gemini, Chat Completions likewise): every later
turn of that chat, on any provider, failed. ``paired_history`` leaves such a part out of
the request (the store keeps the message as edited). docs/decisions.md (embed6).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from turnstate.core._conversation import (
    Message,
    Part,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)


def call_ids(parts: Sequence[Part]) -> tuple[set[str], set[str]]:
    """The call ids of ``parts``' tool calls, and those its tool results answer."""
    calls: set[str] = set()
    results: set[str] = set()
    for part in parts:
        if type(part) is ToolCallPart:
            calls.add(part.call_id)
        elif type(part) is ToolResultPart:
            results.add(part.call_id)
    return calls, results


def paired_history(history: tuple[Message, ...]) -> tuple[tuple[Message, ...], int]:
    """``history`` with each assistant message's tool calls that have no result in it,
    and results that answer no call in it, left out, and how many were (0: ``history``
    itself)."""
    fitted: list[Message] | None = None
    dropped = 0
    user = Role.USER
    for index, message in enumerate(history):
        parts = message.parts
        # most answers are one text part: no set to build (a replay of 10,000 messages
        # calls this once per request)
        if message.role is user or (len(parts) == 1 and type(parts[0]) is TextPart):
            continue
        calls, results = call_ids(parts)
        if calls == results:  # the common case: no tools, or every call answered
            continue
        kept = tuple(p for p in message.parts
                     if not (type(p) is ToolCallPart and p.call_id not in results)
                     and not (type(p) is ToolResultPart and p.call_id not in calls))
        dropped += len(message.parts) - len(kept)
        if fitted is None:
            fitted = list(history)
        fitted[index] = attrs.evolve(message, parts=kept)
    return (tuple(fitted), dropped) if fitted is not None else (history, 0)
