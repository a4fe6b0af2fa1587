"""What a commit and an abort write, serialised and checked before a transaction starts;
the stored parts' character count."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from turnstate.core._context import CHARS_PER_TOKEN, part_chars
from turnstate.core._conversation import (
    PART_TAGS,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from turnstate.core._decisions import decide_turn_persistence
from turnstate.core._envelope import Mode
from turnstate.core._errors import PersistenceRefused, StorageError
from turnstate.core._frozen import slot_maker
from turnstate.core._media import FilePart, ImagePart
from turnstate.storage._media_apart import media_apart
from turnstate.storage._media_json import MEDIA_TAGS, stored_tokens
from turnstate.storage._protocol import TurnAbort, TurnCommit
from turnstate.storage._record_checks import check_storable
from turnstate.storage._record_encoders import (
    encode_audit,
    encode_context,
    encode_usage,
    envelope_text,
)
from turnstate.storage._records import (
    FORBIDDEN_MARKERS,
    _commit_parts,
    _load,
    decode_parts,
    encode_parts,
    encode_path,
    utf8_safe,
    with_parts_recovered,
)

# The stored fields ``part_chars`` counts, per part tag (the property test in
# tests/storage/test_records.py holds the two to the same count).
_COUNTED_FIELDS: dict[str, tuple[str, ...]] = {
    PART_TAGS[TextPart]: ("text",), PART_TAGS[ReasoningPart]: ("text",),
    PART_TAGS[ToolCallPart]: ("name", "arguments"), PART_TAGS[ToolResultPart]: ("output",),
}


def stored_chars(parts_text: str) -> int:
    """``part_chars`` of a stored parts column (for the chat's ``history_chars``).

    Counted on the decoded JSON, without building the parts: a commit counts its user
    message this way, and the cattrs structuring would cost more than the commit's SQL.
    """
    data = _load(parts_text, "message parts")
    if not isinstance(data, list):
        msg = "stored message parts are not a JSON list"
        raise StorageError(msg)
    try:
        chars = sum(len(item[field]) for item in data
                    for field in _COUNTED_FIELDS.get(item["type"], ()))
        media = [item for item in data if item["type"] in MEDIA_TAGS]
        chars += CHARS_PER_TOKEN * sum(stored_tokens(item) for item in media)
    except (TypeError, KeyError, ValueError):
        msg = "stored message parts are unreadable"
        raise StorageError(msg) from None
    return chars


def append_part(parts_text: str, part: Part) -> str:
    return encode_parts((*decode_parts(parts_text), part))


def refuse_forbidden(text: str | None, column: str) -> None:
    """Raise ``PersistenceRefused`` if ``text`` holds a stateless-loop mode or loop messages."""
    if text is None:
        return
    for marker in FORBIDDEN_MARKERS:
        if marker in text:
            msg = f"refusing to store {marker} in {column}"
            raise PersistenceRefused(msg)


@attrs.frozen(kw_only=True)
class CommitColumns:
    """Everything a commit writes, serialised and checked before a transaction starts."""

    parts: str
    chars: int
    audit: str | None
    usage: str | None
    provider_state: str | None
    context: str | None
    strategy: str
    path: str


def commit_columns(commit: TurnCommit) -> CommitColumns:
    """Serialise a commit. Raises ``PersistenceRefused`` for a state that may not be stored."""
    state = commit.provider_state
    if state is not None and state.mode is Mode.STATELESS_LOOP:
        msg = "refusing to store a stateless-loop state as the chat's provider state"
        raise PersistenceRefused(msg)
    if state is not None and state.loop_messages is not None:
        msg = "refusing to store a provider state that carries loop messages"
        raise PersistenceRefused(msg)
    kept = decide_turn_persistence(state)
    provider_state = None if kept is None else utf8_safe(envelope_text(kept))
    audit = encode_audit(commit.audit)
    refuse_forbidden(provider_state, "chats.last_provider_state")
    refuse_forbidden(audit, "messages.provider_state")
    check_storable(commit.strategy)
    # parts, chars, audit, usage, provider_state, context, strategy, path
    return _columns(_commit_parts(commit.parts), part_chars(commit.parts), audit,
                    encode_usage(commit.usage), provider_state, encode_context(commit.context),
                    commit.strategy, encode_path(commit.path))


def media_columns(columns: CommitColumns, commit: TurnCommit
                  ) -> tuple[CommitColumns, list[bytes]]:
    """``columns`` with an answer's inline media (a generated image) set apart from its
    parts, and the bytes, for a store that keeps them apart (SQLite's ``message_media``):
    the columns as they are, and no bytes, for an answer without any."""
    if not any(isinstance(p, ImagePart | FilePart) and p.data is not None
               for p in commit.parts):
        return columns, []
    text, blobs = media_apart(with_parts_recovered(commit.parts))
    return attrs.evolve(columns, parts=text), blobs


def abort_billing(abort: TurnAbort) -> tuple[str | None, str | None]:
    """An abort's usage and audit columns (None each when it has none)."""
    audit = encode_audit(abort.audit)
    refuse_forbidden(audit, "messages.provider_state")
    return encode_usage(abort.usage), audit


_columns: Callable[[str, int, str | None, str | None, str | None, str | None, str, str],
                   CommitColumns] = slot_maker(CommitColumns)
"""``CommitColumns`` without attrs' ``__init__`` (``core._frozen``): one a commit."""
