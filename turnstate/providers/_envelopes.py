"""The continuation envelope after a provider call."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from turnstate.core._decisions import TurnContext
from turnstate.core._envelope import SCHEMA_VERSION, ContinuationEnvelope, Mode
from turnstate.core._frozen import slot_maker
from turnstate.core._json import JsonObject
from turnstate.providers._protocol import ProviderResponse

_envelope: Callable[[str, Mode, str, str, str, str | None, datetime | None, int | None,
                     JsonObject | None, tuple[JsonObject, ...] | None, int],
                    ContinuationEnvelope] = slot_maker(ContinuationEnvelope)
"""``ContinuationEnvelope`` without attrs' ``__init__`` (``core._frozen``; issue 26): its
``created_at`` converter and validator, and the loop's converter, run as there."""


def standard_envelope(
    ctx: TurnContext,
    mode: Mode,
    response: ProviderResponse,
    *,
    loop_messages: tuple[JsonObject, ...],
    now: datetime,
    covers_seq: int,
) -> ContinuationEnvelope:
    """The envelope after a call: durable modes name the response id as the cursor;
    the stateless loop carries its messages and no cursor."""
    durable = mode.durable
    # provider, mode, model_name, system_prompt_hash, toolset_hash, cursor, created_at,
    # covers_seq, metadata, loop_messages, schema_version
    return _envelope(ctx.provider, mode, ctx.model_name, ctx.system_prompt_hash,
                     ctx.toolset_hash, response.response_id if durable else None, now,
                     covers_seq, dict(response.metadata) or None,
                     None if durable else loop_messages, SCHEMA_VERSION)
