"""Deciding how a turn continues, and what of its state may be stored.

``decide_continuation`` runs once per turn, before the first provider call. It reads
whatever the chat row holds and checks, in this order, the first failure being the
reason: ``envelope_malformed``, ``provider_changed``, ``model_changed``,
``system_prompt_changed``, ``toolset_changed``, ``cursor_invalid``, ``cursor_expired``,
then ``context_overflow`` (the last snapshot was critical and the provider does not
compact the cursor's conversation: replay, trimmed, before the provider refuses it).
Durable providers then continue by cursor or degrade to a replay; stateless providers
always run a local loop.

``decide_turn_persistence`` is the single filter between a turn's provider state and
``chats.last_provider_state``: a stateless loop never passes, nor a durable state
without a cursor, and loop messages are always stripped.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import attrs

from turnstate.core._envelope import ContinuationEnvelope, Mode, parse_envelope
from turnstate.core._errors import ConfigurationError, EnvelopeMalformed
from turnstate.core._frozen import slot_maker
from turnstate.core._registry import DEFAULT_REGISTRY, ProviderCapability, Registry


class Strategy(StrEnum):
    """How the turn presents the conversation to the provider."""

    CURSOR = "cursor"
    REPLAY = "replay"
    LOCAL_LOOP = "local_loop"


class DegradationReason(StrEnum):
    """Why a stored cursor was not used. The values are the wire and log codes."""

    PROVIDER_CHANGED = "provider_changed"
    MODEL_CHANGED = "model_changed"
    SYSTEM_PROMPT_CHANGED = "system_prompt_changed"
    TOOLSET_CHANGED = "toolset_changed"
    CURSOR_EXPIRED = "cursor_expired"
    CURSOR_INVALID = "cursor_invalid"
    ENVELOPE_MALFORMED = "envelope_malformed"
    CONTEXT_OVERFLOW = "context_overflow"
    """The cursor's conversation outgrew the model's context window: the provider refused
    it, or the last snapshot was critical on a provider that does not compact it."""


def _require_aware(_: object, attribute: attrs.Attribute[Any], value: datetime | None) -> None:
    # A naive ``now`` cannot be compared with the aware ``createdAt`` of an envelope.
    if value is not None and value.tzinfo is not UTC and value.utcoffset() is None:
        msg = f"TurnContext.{attribute.name} must be an aware datetime, got a naive one"
        raise ConfigurationError(msg)


@attrs.frozen(kw_only=True)
class TurnContext:
    """What the turn is about to be run with, as the validator compares it.

    Attributes:
        committed_seq: the highest sequence number of the committed history (None: empty).
        now: the current time (aware); without it expiry is not checked.
        context_critical: the chat's last committed context snapshot was ``critical``
            (``chats.last_context_state``): the cursor's conversation fills the window.
        provider_compaction: the turn asks for server-side compaction
            (``ContextSettings.provider_compaction_enabled``), which OpenAI Responses
            applies to the cursor's conversation; Gemini Interactions has none.

    Raises:
        ConfigurationError: ``now`` is a naive datetime.
    """

    provider: str
    model_name: str
    system_prompt_hash: str
    toolset_hash: str
    committed_seq: int | None = None
    now: datetime | None = attrs.field(default=None, validator=_require_aware)
    context_critical: bool = False
    provider_compaction: bool = True


@attrs.frozen(kw_only=True)
class ContinuationDecision:
    """The outcome of validation.

    ``envelope`` is the parsed stored envelope when there was a readable one (also when
    it was rejected, for logs and the transition part); ``reason`` is None when nothing
    degraded.
    """

    strategy: Strategy
    reason: DegradationReason | None = None
    envelope: ContinuationEnvelope | None = None

    @property
    def rejected_stored_state(self) -> bool:
        """A stored value existed and may not be used: the chat row must be cleared."""
        return self.reason is not None


def _fallback(capability: ProviderCapability) -> Strategy:
    return Strategy.REPLAY if capability.durable else Strategy.LOCAL_LOOP


def _mode_matches(envelope: ContinuationEnvelope, registry: Registry) -> bool:
    known = registry.providers.get(envelope.provider)
    return envelope.mode.durable and (known is None or known.mode is envelope.mode)


def _cursor_problem(
    envelope: ContinuationEnvelope, ctx: TurnContext, capability: ProviderCapability
) -> DegradationReason | None:
    if envelope.cursor is None or not envelope.cursor.strip():
        return DegradationReason.CURSOR_INVALID
    if envelope.covers_seq is not None and envelope.covers_seq != ctx.committed_seq:
        return DegradationReason.CURSOR_INVALID
    if (
        capability.retention is not None
        and envelope.created_at is not None
        and ctx.now is not None
        and ctx.now - envelope.created_at > capability.retention
    ):
        return DegradationReason.CURSOR_EXPIRED
    return None


def _compacts_cursor(capability: ProviderCapability, ctx: TurnContext) -> bool:
    """The provider shrinks the cursor's stored conversation itself: OpenAI Responses
    when the turn asks for compaction. Gemini Interactions documents no compaction."""
    return capability.mode is Mode.RESPONSES and ctx.provider_compaction


def _first_difference(
    envelope: ContinuationEnvelope, ctx: TurnContext
) -> DegradationReason | None:
    if envelope.provider != ctx.provider:
        return DegradationReason.PROVIDER_CHANGED
    if envelope.model_name != ctx.model_name:
        return DegradationReason.MODEL_CHANGED
    if envelope.system_prompt_hash != ctx.system_prompt_hash:
        return DegradationReason.SYSTEM_PROMPT_CHANGED
    if envelope.toolset_hash != ctx.toolset_hash:
        return DegradationReason.TOOLSET_CHANGED
    return None


_decision: Callable[[Strategy, DegradationReason | None, ContinuationEnvelope | None],
                    ContinuationDecision] = slot_maker(ContinuationDecision)
"""``ContinuationDecision`` without attrs' ``__init__`` (``_frozen``): every cursor turn's."""


def decide_continuation(
    stored: object, ctx: TurnContext, registry: Registry = DEFAULT_REGISTRY
) -> ContinuationDecision:
    """Decide the turn's strategy from the stored chat state.

    Args:
        stored: ``chats.last_provider_state`` as read: None, text, bytes or a mapping.
        ctx: the turn about to run.
        registry: provider capabilities (retention, durable or not).

    Raises:
        ConfigurationError: ``ctx.provider`` is unknown to the registry.
    """
    capability = registry.provider(ctx.provider)
    fallback = _fallback(capability)
    if stored is None:
        return ContinuationDecision(strategy=fallback)
    try:
        envelope = parse_envelope(stored)
    except EnvelopeMalformed:
        return ContinuationDecision(strategy=fallback, reason=DegradationReason.ENVELOPE_MALFORMED)
    if not _mode_matches(envelope, registry):
        # A stateless-loop state, or a mode its provider never issues: never a cursor.
        return ContinuationDecision(
            strategy=fallback, reason=DegradationReason.ENVELOPE_MALFORMED, envelope=envelope
        )
    reason = _first_difference(envelope, ctx)
    if reason is None and not capability.durable:
        # Same name, yet the provider keeps no cursor: the stored value cannot be one.
        reason = DegradationReason.ENVELOPE_MALFORMED
    if reason is None:
        reason = _cursor_problem(envelope, ctx, capability)
    if reason is None and ctx.context_critical and not _compacts_cursor(capability, ctx):
        reason = DegradationReason.CONTEXT_OVERFLOW
    if reason is not None:
        return ContinuationDecision(strategy=fallback, reason=reason, envelope=envelope)
    return _decision(Strategy.CURSOR, None, envelope)  # strategy, reason, envelope


def decide_turn_persistence(state: ContinuationEnvelope | None) -> ContinuationEnvelope | None:
    """What of a turn's final provider state may become ``chats.last_provider_state``.

    None for stateless-loop states and for durable states without a usable cursor;
    otherwise the envelope without ``loopMessages``.
    """
    if state is None or state.mode is Mode.STATELESS_LOOP or not state.mode.durable:
        return None
    if state.cursor is None or not state.cursor.strip():
        return None
    return state if state.loop_messages is None else state.without_loop()


KEPT_UNTIL_COMMIT = frozenset({
    DegradationReason.PROVIDER_CHANGED, DegradationReason.MODEL_CHANGED,
    DegradationReason.SYSTEM_PROMPT_CHANGED, DegradationReason.TOOLSET_CHANGED,
    DegradationReason.CONTEXT_OVERFLOW,
})
"""Degradations whose stored envelope is still a good cursor: only this turn's settings
differ (or, for ``context_overflow``, the provider still holds it but it is too long:
a failed trimmed replay leaves it, and the next turn degrades the same way instead of
running an untrimmed replay). The envelope stays the chat's state until the degraded turn
commits (which replaces it), so a turn that fails leaves it, and reverting the change
continues by cursor."""


def clears_stored_state(reason: str) -> bool:
    """True when a degradation for ``reason`` clears ``last_provider_state`` at once: the
    stored envelope can never be used again (malformed, invalid, expired, or lost at the
    provider). A changed provider, model, prompt or toolset keeps it until the commit."""
    return reason not in KEPT_UNTIL_COMMIT

