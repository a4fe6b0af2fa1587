"""The continuation envelope after a provider call."""

from __future__ import annotations

from datetime import datetime

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
    durable = mode.durable
    return ContinuationEnvelope(  # one constructor call: attrs.evolve costs several
        provider=ctx.provider,
        mode=mode,
        model_name=ctx.model_name,
        system_prompt_hash=ctx.system_prompt_hash,
        toolset_hash=ctx.toolset_hash,
        cursor=response.response_id if durable else None,
        created_at=now,
        covers_seq=covers_seq,
        metadata=dict(response.metadata) or None,
        loop_messages=None if durable else loop_messages,
    )
