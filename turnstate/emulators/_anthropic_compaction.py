"""Threshold compaction in the Anthropic emulator (``compact_20260112``).

What it enforces and does, as the API documents it (docs/decisions.md, 2026-12-03):

* ``context_management.edits`` with ``{"type": "compact_20260112", "trigger":
  {"type": "input_tokens", "value": N}}`` needs the ``compact-2026-01-12`` beta; the
  trigger defaults to 150,000 and ``N`` below 50,000 is refused;
* a request's conversation starts at its latest compaction block: every block before
  it is dropped, for the token count and for the model;
* a compaction block sent back must carry its ``content`` ("...compaction.content:
  Field required" when missing, "content can't be empty" when empty); ``content:
  null`` is a failed compaction and a no-op;
* when the input reaches the trigger, the answer starts with a ``compaction`` block
  (a summary of the visible conversation, and an ``encrypted_content`` signed by the
  emulator), and the top-level usage counts the compacted context while
  ``usage.iterations`` reports the summarising step apart.

The wording of the beta-header refusal is the emulator's own (UNCONFIRMED); the others
are the API's as observed (anthropic-sdk-python#1828, vercel/ai#13335).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from turnstate.core._json import JsonObject

BETA = "compact-2026-01-12"
STRATEGY = "compact_20260112"
DEFAULT_TRIGGER = 150_000
MIN_TRIGGER = 50_000
MISSING_CONTENT = "messages.{}.content.{}.compaction.content: Field required"
EMPTY_CONTENT = "messages.{}.content.{}.compaction.content: content can't be empty"
NOT_TEXT = "messages.{}.content.{}.compaction.content: Input should be a valid string"
LOW_TRIGGER = ("context_management.edits.{}.trigger.value: Input should be greater than or "
               f"equal to {MIN_TRIGGER}")
NO_BETA = (f"context_management.edits.{{}}: the {STRATEGY} strategy requires the "
           f"anthropic-beta header {BETA}")
BLOCK_WITHOUT_BETA = ("messages.{}.content.{}: Input tag 'compaction' found using 'type' does "
                      "not match any of the expected tags (a compaction block is a beta "
                      f"param: anthropic-beta {BETA})")
SUMMARY_TEXT_CHARS = 120


@attrs.frozen(kw_only=True)
class Trigger:
    """The request's compaction trigger (input tokens), or the reason it is refused."""

    tokens: int | None = None
    problem: str | None = None


def trigger_of(body: Mapping[str, Any], beta_header: str) -> Trigger:
    """The ``compact_20260112`` trigger of a request: none without the edit."""
    management = body.get("context_management")
    edits = management.get("edits") if isinstance(management, Mapping) else None
    for index, edit in enumerate(edits if isinstance(edits, list) else ()):
        if not isinstance(edit, Mapping) or edit.get("type") != STRATEGY:
            continue
        if BETA not in (name.strip() for name in beta_header.split(",")):
            return Trigger(problem=NO_BETA.format(index))
        trigger = edit.get("trigger")
        value = trigger.get("value") if isinstance(trigger, Mapping) else DEFAULT_TRIGGER
        if not isinstance(value, int) or value < MIN_TRIGGER:
            return Trigger(problem=LOW_TRIGGER.format(index))
        return Trigger(tokens=value)
    return Trigger()


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def check_compaction_blocks(messages: Sequence[Mapping[str, Any]],
                            beta_header: str) -> str | None:
    """The first compaction block sent back without its content, or in a request that
    does not name the compaction beta (only the beta params have the block), as the API
    says it."""
    beta = BETA in (name.strip() for name in beta_header.split(","))
    for index, message in enumerate(messages):
        for position, block in enumerate(_blocks(message)):
            if not isinstance(block, Mapping) or block.get("type") != "compaction":
                continue
            if not beta:
                return BLOCK_WITHOUT_BETA.format(index, position)
            if "content" not in block:
                return MISSING_CONTENT.format(index, position)
            content = block["content"]
            if content == "":
                return EMPTY_CONTENT.format(index, position)
            if content is not None and not isinstance(content, str):
                return NOT_TEXT.format(index, position)
    return None


def visible_messages(messages: Sequence[JsonObject]) -> list[JsonObject]:
    """The conversation the model sees: from the latest compaction block that carries a
    summary (the message holding it trimmed to start there), else all of it."""
    for index in range(len(messages) - 1, -1, -1):
        blocks = _blocks(messages[index])
        for position in range(len(blocks) - 1, -1, -1):
            block = blocks[position]
            if isinstance(block, Mapping) and block.get("type") == "compaction" \
                    and isinstance(block.get("content"), str) and block["content"]:
                head = {**messages[index], "content": blocks[position:]}
                return [head, *messages[index + 1:]]
    return list(messages)


def summary_of(user_texts: Sequence[str], items: int) -> str:
    """The emulator's summary: how much it stands for and the latest user text, short."""
    last = user_texts[-1][:SUMMARY_TEXT_CHARS] if user_texts else ""
    return f"Summary of {items} earlier conversation items; the user last said: {last!r}"


def compaction_iterations(full: int, summary: int, compacted: int,
                          output: int) -> list[JsonObject]:
    """``usage.iterations`` of a compacting request: the summarising step, then the answer."""
    zero = {"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    return [{"type": "compaction", "input_tokens": full, "output_tokens": summary, **zero},
            {"type": "message", "input_tokens": compacted, "output_tokens": output, **zero}]
