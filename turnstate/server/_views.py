"""JSON views of chats, messages, turns and events (camelCase, as the page reads them).

Nothing here does IO: the routes load records and hand them over. Provider blobs
(reasoning signatures, encrypted reasoning) never leave the server, and the stored
cursor is shown redacted: provider, mode, model and age, never the cursor itself.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import quote

import attrs

from turnstate.core import MediaRef
from turnstate.core._bill import cost_unknown_turns as unknown_turns
from turnstate.core._context import context_snapshot, estimate_tokens
from turnstate.core._conversation import Message, TransitionPart
from turnstate.core._cost import audit_cost, usd_text
from turnstate.core._envelope import parse_envelope
from turnstate.core._errors import EnvelopeMalformed, StorageError
from turnstate.core._event_json import camel
from turnstate.core._generation import ReasoningEffort
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo, ProviderCapability, Registry
from turnstate.storage import (
    ChatRecord,
    LeanMessage,
    LeanPart,
    LeanWindow,
    TurnRecord,
    TurnStatus,
    decode_audit,
    decode_context,
)
from turnstate.storage._lean import lean_message
from turnstate.storage._records import encode_parts

_HIDDEN_PART_KEYS = frozenset({"signature", "data", "raw"})
"""Provider blobs and inline bytes: a reasoning signature, encrypted reasoning, an opaque
block's verbatim JSON (``OpaquePart.raw``: a compaction's encrypted content...)."""
_TITLE_CHARS = 60


def camel_keys(value: Any) -> Any:
    """A JSON-ready value with every dict key in camelCase."""
    if isinstance(value, dict):
        return {camel(str(k)): camel_keys(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [camel_keys(item) for item in value]
    return value


def ts(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def chat_summary(chat: ChatRecord, first: Sequence[LeanMessage] = (), total: int = 0,
                 title: str | None = None) -> dict[str, Any]:
    """A chat as listed: its title is ``title`` (the one it was renamed to), else the
    first user message among ``first`` (the chat's oldest messages); ``total`` its
    message count. ``renamed`` says which."""
    if title is None:
        first_user = next((m.text() for m in first if m.role == "user"), "")
        title = " ".join(first_user.split())[:_TITLE_CHARS] or "New chat"
        renamed = False
    else:
        renamed = True
    return {"id": chat.id, "title": title, "renamed": renamed,
            "createdAt": ts(chat.created_at), "updatedAt": ts(chat.updated_at),
            "version": chat.version, "messageCount": total,
            "busy": chat.active_turn_id is not None, "activeTurnId": chat.active_turn_id}


TITLE_MESSAGES = 4
"""The oldest messages a title is looked for in (a chat's first is its user's, unless a
single delete removed it)."""


def chat_detail(chat: ChatRecord, window: LeanWindow, first: Sequence[LeanMessage],
                turns: Sequence[TurnRecord], now: datetime, *,
                registry: Registry = DEFAULT_REGISTRY,
                title: str | None = None) -> dict[str, Any]:
    """The chat with one window of its messages (``Store.load_messages_lean``: a view
    shows media by reference, never its bytes).

    Each answer is tied to its turn by the turn record's ``assistant_message_id``: after
    "delete from here" the sequence numbers are reused, message ids never are. ``first``
    are the chat's oldest messages (the title), ``turns`` its newest turns (the meter).
    """
    by_message = {turn.assistant_message_id: turn for turn in window.turns
                  if turn.assistant_message_id is not None}
    shown = window.messages
    return {**chat_summary(chat, first, window.total, title),
            "messages": [message_view(m, by_message.get(m.id)) for m in shown],
            "older": shown[0].seq if window.more and shown else None,
            "context": current_context(chat, turns, registry),
            "continuation": envelope_view(chat.last_provider_state, now),
            "costUsd": chat_cost(shown), "costUnknownTurns": cost_unknown_turns(shown)}


def chat_cost(messages: Sequence[LeanMessage]) -> str | None:
    """The cost in USD of the priced turns among ``messages``; None when none was priced."""
    totals = [text for m in messages if m.role == "assistant"
              and (text := audit_cost(m.provider_state)) is not None]
    if not totals:
        return None
    try:
        return usd_text(sum((Decimal(t) for t in totals), Decimal(0)))
    except InvalidOperation:  # an audit row edited by hand
        return None


def cost_unknown_turns(messages: Sequence[LeanMessage]) -> int:
    """How many answers among ``messages`` were billed at no price turnstate knows
    (``turnstate.cost_unknown_turns``): the chat's ``costUsd`` is a floor when not 0."""
    return unknown_turns(messages)


MESSAGE_PAGE = 50
"""Messages in one chat view unless ``limit`` says otherwise."""


@attrs.frozen
class MessagePage:
    """``limit`` messages ending before the message ``before`` (the newest when None)."""

    limit: int = MESSAGE_PAGE
    before: int | None = None


def meter_settled(turns: Sequence[TurnRecord]) -> bool:
    """Whether the newest turns ``turns`` (newest first) decide the context meter: they
    hold the last completed turn and, if its answer is gone, one whose answer remains."""
    latest = next((t for t in turns if t.status is TurnStatus.COMPLETED), None)
    return latest is not None and any(t.assistant_message_id is not None for t in turns)


def current_context(chat: ChatRecord, turns: Sequence[TurnRecord],
                    registry: Registry) -> dict[str, Any] | None:
    """The stored context snapshot, while it still describes the history.

    The snapshot is committed with a turn. Once "delete from here" removed that turn's
    answer (its record's ``assistant_message_id`` is then None), it describes messages
    that are gone: the meter then shows an estimate of what remains (the chat's
    ``history_chars``) against the last remaining turn's model. ``turns`` are the chat's
    newest turns, newest first, enough of them for ``meter_settled`` (or all).
    """
    latest = next((t for t in turns if t.status is TurnStatus.COMPLETED), None)
    if latest is None or latest.assistant_message_id is not None:
        return context_view(chat.last_context_state)
    kept = next((t for t in turns if t.assistant_message_id is not None), None)
    if kept is None or (kept.provider, kept.model) not in registry.models:
        return None
    snapshot = context_snapshot(provider=kept.provider, model=kept.model,
                                reported_input_tokens=None, registry=registry,
                                estimated_tokens=estimate_tokens(chars=chat.history_chars))
    return camel_keys(attrs.asdict(snapshot))  # type: ignore[no-any-return]


def message_view(message: LeanMessage | Message, turn: TurnRecord | None) -> dict[str, Any]:
    """A message as shown; one read in full is shown as its lean read (``lean_message``):
    its bytes never written out."""
    if isinstance(message, Message):
        message = lean_message(message)
    parts = [part_view(message, index, part) for index, part in enumerate(message.parts)]
    view: dict[str, Any] = {"id": message.id, "etag": message_etag(message, parts),
                            "seq": message.seq, "role": message.role.value,
                            "status": message.status.value, "parts": parts,
                            "createdAt": ts(message.created_at)}
    if message.role == "assistant":
        view["turn"] = turn_view(message, turn)
    return view


def message_etag(message: LeanMessage | Message,
                 parts: Sequence[dict[str, Any]] | None = None) -> str:
    """The message's entity tag (quoted, strong), which ``If-Match`` on ``PATCH`` and
    ``DELETE .../messages/{seq}`` names (places11): its id, which no other message is
    ever given, and a digest of what it holds (its shown parts, status and last change):
    an edit in place keeps the id, and a client that never saw the edit must not edit or
    delete past it. ``parts``: the message's shown parts when already made."""
    if isinstance(message, Message):
        message = lean_message(message)
    if parts is None:
        parts = [part_view(message, index, part) for index, part in enumerate(message.parts)]
    held = repr((message.status.value, message.updated_at.isoformat(), parts))  # a view's
    # parts are built in one key order: their repr is as stable as JSON, and 3x cheaper
    digest = hashlib.sha256(held.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    name = message.id if _ETAG_CHARS.fullmatch(message.id) else "m"  # a tag's characters
    return f'"{name}.{digest}"'


_ETAG_CHARS = re.compile(r"[\x21\x23-\x7e]{1,200}")
"""What an entity tag may hold (RFC 9110 ``etagc``: visible ASCII but the quote)."""


def part_view(message: LeanMessage, index: int, part: LeanPart) -> dict[str, Any]:
    """One stored part as shown: provider blobs left out. An image or file (read
    without its bytes, ``MediaRef``) says its media type and token estimate (as
    stored), its url or filename when it has one, and when inline its size and ``src``,
    the route that serves its bytes."""
    if isinstance(part, MediaRef):
        return media_view(message, index, part)
    raw: dict[str, Any] = json.loads(encode_parts([part]))[0]
    return {k: v for k, v in raw.items() if k not in _HIDDEN_PART_KEYS}


def media_view(message: LeanMessage, index: int, part: MediaRef) -> dict[str, Any]:
    """An image or file part as shown (the keys its stored form has, the bytes aside)."""
    shown: dict[str, Any] = {"type": part.kind, "mediaType": part.media_type}
    if part.url is not None:
        shown["url"] = part.url
    if part.filename is not None:
        shown["filename"] = part.filename
    shown["tokens"] = part.tokens
    if part.size is not None:
        shown["bytes"] = part.size
        shown["src"] = part_path(message.chat_id, message.seq, index)
    return shown


def part_path(chat_id: str, seq: int, index: int) -> str:
    """Where ``GET`` serves the inline bytes of a message's part ``index``."""
    return f"/api/chats/{quote(chat_id, safe='')}/messages/{seq}/parts/{index}"


def turn_view(message: LeanMessage, turn: TurnRecord | None) -> dict[str, Any] | None:
    """The per-turn audit shown under an assistant message."""
    if turn is None:
        return None
    audit = _audit(message.provider_state)
    sent = (audit or {}).get("sent") or {}
    degradation = next((p.reason for p in message.parts if isinstance(p, TransitionPart)),
                       None)
    usage = message.usage
    return {
        "id": turn.id, "status": turn.status.value, "provider": turn.provider,
        "model": turn.model, "strategy": turn.strategy, "reason": turn.reason,
        "detail": turn.detail, "degradation": degradation,
        "path": [turn.path[0].source, *(s.dest for s in turn.path)] if turn.path else [],
        "usage": camel_keys(attrs.asdict(usage)) if usage is not None else None,
        "cacheHitTokens": (usage.cache_hit_tokens or usage.cached_input_tokens or 0)
        if usage is not None else 0,
        "requests": sent.get("requests"), "requestBytes": sent.get("requestBytes"),
        "retries": sent.get("retries", 0) if sent else None,
        "costUsd": audit_cost(message.provider_state),
        "metadata": audit,
    }


def _audit(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        audit = decode_audit(text)
    except StorageError:
        return None
    return camel_keys(dict(audit.metadata or {})) or None


def context_view(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        snapshot = decode_context(text)
    except StorageError:
        return None
    return camel_keys(attrs.asdict(snapshot))  # type: ignore[no-any-return]


def envelope_view(text: str | None, now: datetime) -> dict[str, Any] | None:
    """The stored continuation state, decoded; the cursor itself is never shown."""
    if text is None:
        return None
    try:
        envelope = parse_envelope(text)
    except EnvelopeMalformed:
        return {"malformed": True}
    created = envelope.created_at
    return {"provider": envelope.provider, "mode": envelope.mode.value,
            "model": envelope.model_name,
            "cursor": "<redacted>" if envelope.cursor else None,
            "coversSeq": envelope.covers_seq,
            "ageSeconds": None if created is None else round((now - created).total_seconds())}


def model_limits(provider: ProviderCapability, model: ModelInfo) -> dict[str, Any]:
    """What the page's settings may offer for ``model`` (``/api/config``), the bounds the
    engine checks a turn's settings against: ``maxOutputTokens`` from the provider's least
    (OpenAI Responses: 16) to the model's most, null where the provider takes no limit;
    ``reasoningEfforts`` the efforts the model takes, least first (empty: none at all)."""
    takes = provider.settings
    tokens = "max_output_tokens" in takes
    efforts = [effort.value for effort in ReasoningEffort
               if "reasoning_effort" in takes and effort.value in model.reasoning_efforts]
    return {"minOutputTokens": provider.min_output_tokens if tokens else None,
            "maxOutputTokens": model.max_output_tokens if tokens else None,
            "reasoningEfforts": efforts}
