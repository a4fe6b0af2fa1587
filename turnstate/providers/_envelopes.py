"""The continuation envelope after a provider call."""

from __future__ import annotations

from datetime import datetime

import attrs

from turnstate.core._decisions import TurnContext
from turnstate.core._envelope import ContinuationEnvelope, Mode
from turnstate.core._json import JsonObject
from turnstate.providers._protocol import ProviderResponse


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
    metadata = dict(response.metadata) or None
    base = ContinuationEnvelope(
        provider=ctx.provider,
        mode=mode,
        model_name=ctx.model_name,
        system_prompt_hash=ctx.system_prompt_hash,
        toolset_hash=ctx.toolset_hash,
        created_at=now,
        covers_seq=covers_seq,
        metadata=metadata,
    )
    if mode.durable:
        return attrs.evolve(base, cursor=response.response_id)
    return attrs.evolve(base, loop_messages=loop_messages)
