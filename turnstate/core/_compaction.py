"""Provider compaction points: where a stored conversation may start again.

OpenAI Responses and Anthropic Messages compact a long conversation on their side and
hand back one opaque part that stands for everything before it: an OpenAI
``compaction`` output item (``encrypted_content``) or an Anthropic ``compaction``
content block (``content``, the summary, plus whatever the API adds). The codecs keep
it as an ``OpaquePart`` of kind ``compaction``. Both providers document that a request
may leave out everything before the latest one (OpenAI: "drop items that came before
the most recent compaction item"; Anthropic: "the API drops all message blocks prior to
the compaction block"), so a replay or local loop sends that part and what came after
it, and the context estimate counts from it. The full history stays in the database.

A compaction is used only by the provider and model that made it (the opaque-part rule):
a switch of provider or model replays the full history. A block without its payload (an
Anthropic compaction that failed has ``content: null``) is not a compaction point.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import attrs

from turnstate.core._context import part_chars
from turnstate.core._conversation import Message, OpaquePart, Part
from turnstate.core._registry import is_snapshot_of

COMPACTION_KIND = "compaction"


same_model = is_snapshot_of
"""Whether an artefact made by model ``produced`` may be replayed to ``requested``: the
same name, or a dated snapshot of it (``core._registry.is_snapshot_of``)."""


def compaction_payload(part: OpaquePart) -> str | None:
    """The text a compaction carries: the summary (``content``) when the block has that
    field, else the ``encrypted_content``; None when it is missing, empty or unreadable
    (a failed compaction, which the providers treat as a no-op)."""
    try:
        block = json.loads(part.raw)
    except ValueError:
        return None
    if not isinstance(block, dict):
        return None
    value = block["content"] if "content" in block else block.get("encrypted_content")
    return value if isinstance(value, str) and value else None


def is_compaction_point(part: Part, provider: str, model: str) -> bool:
    """A whole compaction made by ``provider`` and ``model`` (a dated snapshot counts)."""
    return (type(part) is OpaquePart and part.kind == COMPACTION_KIND
            and part.provider == provider and same_model(part.model, model)
            and compaction_payload(part) is not None)


def latest_in_parts(parts: Sequence[Part], provider: str, model: str) -> int | None:
    """The index of the latest compaction point in ``parts``, or None."""
    for index in range(len(parts) - 1, -1, -1):
        part = parts[index]
        if type(part) is OpaquePart and is_compaction_point(part, provider, model):
            return index
    return None


@attrs.frozen(kw_only=True)
class CompactionPoint:
    """Where the latest usable compaction sits: ``message`` indexes the history, ``part``
    that message's parts."""

    message: int
    part: int


def latest_compaction(
    history: Sequence[Message], provider: str, model: str
) -> CompactionPoint | None:
    """The latest compaction point of ``history`` for ``provider`` and ``model``.

    Scans from the end and stops at the first message holding one, so a long chat that
    compacted recently costs a short scan; a history that carries its facts
    (``core._history_facts.CountedHistory``) looks only at its messages holding an
    opaque part (a chat that never compacted: none).
    """
    facts = getattr(history, "facts", None)
    indexes = range(len(history) - 1, -1, -1) if facts is None else reversed(facts.opaque)
    for index in indexes:
        parts = history[index].parts
        if not any(type(p) is OpaquePart for p in parts):
            continue
        found = latest_in_parts(parts, provider, model)
        if found is not None:
            return CompactionPoint(message=index, part=found)
    return None


def history_from_compaction(
    history: Sequence[Message], provider: str, model: str
) -> tuple[tuple[Part, ...], tuple[Message, ...]] | None:
    """What a request sends of ``history`` after its latest compaction point: the parts of
    the compacting message from the compaction on, then the later messages; None when
    the history holds no compaction point for ``provider`` and ``model``."""
    point = latest_compaction(history, provider, model)
    if point is None:
        return None
    head = history[point.message].parts[point.part:]
    return tuple(head), tuple(history[point.message + 1:])


def compaction_chars(parts: Iterable[Part]) -> int:
    """Characters the compaction points among ``parts`` add to the context estimate
    (their payload; other opaque parts count nothing, as before)."""
    total = 0
    for part in parts:
        if type(part) is OpaquePart and part.kind == COMPACTION_KIND:
            total += len(compaction_payload(part) or "")
    return total


def context_chars(
    parts: Sequence[Part],
    *,
    history: Sequence[Message] | None,
    history_chars: int,
    provider: str,
    model: str,
) -> tuple[int, Sequence[Part], bool]:
    """What the context estimate counts of a turn, from the latest compaction point on.

    Returns the characters counted before ``parts`` (the history, or the compaction's
    payload), the parts of this turn still to count, and whether the user's text still
    counts (a compaction made in this turn summarised it). ``history`` None (a cursor
    turn, which never reads it) counts the stored ``history_chars``.
    """
    own = latest_in_parts(parts, provider, model)
    if own is not None:
        return compaction_chars(parts[own:own + 1]), parts[own + 1:], False
    cut = history_from_compaction(history, provider, model) if history is not None else None
    if cut is None:
        return history_chars, parts, True
    head, later = cut
    chars = compaction_chars(head[:1]) + part_chars(head[1:])
    return chars + sum(part_chars(m.parts) for m in later), parts, True
