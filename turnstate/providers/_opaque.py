"""Blocks, items and steps a codec does not model: kept verbatim, replayed only to
the provider and model that made them."""

from __future__ import annotations

import functools
import json
import logging

from turnstate.core._compaction import same_model
from turnstate.core._conversation import OpaquePart
from turnstate.core._json import JsonObject, compact_json
from turnstate.providers._frames import text_of

logger = logging.getLogger("turnstate")


def opaque_part(provider: str, model: str, block: JsonObject) -> OpaquePart:
    """A block, item or step the codec does not model, kept verbatim (compact JSON)."""
    kind = text_of(block.get("type")) or "unknown"
    _log_opaque(provider, kind)
    return OpaquePart(provider=provider, model=model, kind=kind, raw=compact_json(block))


@functools.cache
def _log_opaque(provider: str, kind: str) -> None:
    """Once per process and kind: what a provider sends that turnstate keeps opaque."""
    logger.debug("[provider][opaque] %s sent a %r block turnstate does not model; it is "
                 "kept verbatim and replayed only to the same provider and model",
                 provider, kind)


def replayable(part: OpaquePart, provider: str, model: str) -> JsonObject | None:
    """The opaque block to send back, or None when it is another provider's or model's."""
    if part.provider != provider or not same_model(part.model, model):
        return None
    block = json.loads(part.raw)
    return block if isinstance(block, dict) else None
