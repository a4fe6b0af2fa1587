"""The audit a reclaimed turn's answer gets, and the late bill that may replace it.

A turn aborted by another node's reclaim (a begin on its expired lease, the expiry
sweep) never recorded its answer: the requests it sent were billed, but nobody wrote
what they cost. Its answer's audit (``messages.provider_state``, when the turn wrote
none) then says so: ``usageMissing`` (the chat's ``costUnknownTurns``, ``inspect``'s
"unknown") and ``leaseReclaimed``, the marker by which the turn itself, still running on
a node that lost its lease, may later write what it billed (``abort_turn`` with a usage
and an audit): once, and nothing else of the answer (its status, parts and the turn's
row stay the reclaim's). Every store writes the same fields; PostgreSQL builds them in
``ts_reclaim_turn`` (schema version 15, ``_postgres_reclaimed``).
"""

from __future__ import annotations

import json

from turnstate.core._conversation import AuditState
from turnstate.storage._record_encoders import encode_audit
from turnstate.storage._records import LEASE_EXPIRED

LEASE_RECLAIMED = "leaseReclaimed"
"""The audit metadata key of an answer its turn never recorded (see the module)."""
RECLAIMED_STRATEGY = "unknown"
"""The audit's strategy: the turn chose one, but never wrote it."""


def reclaimed_audit(provider: str, model: str) -> str:
    """The audit text of a reclaimed turn's answer (its provider and model, no cursor)."""
    text = encode_audit(AuditState(
        provider=provider, model_name=model, strategy=RECLAIMED_STRATEGY,
        system_prompt_hash="", toolset_hash="", reason=LEASE_EXPIRED,
        metadata={"usageMissing": True, LEASE_RECLAIMED: True}))
    assert text is not None  # an audit always encodes
    return text


def is_reclaimed(audit_text: str | None) -> bool:
    """Whether an answer's audit is a reclaim's marker (the turn's bill never written)."""
    if not audit_text or f'"{LEASE_RECLAIMED}"' not in audit_text:
        return False
    try:
        metadata = json.loads(audit_text).get("metadata")
    except (ValueError, AttributeError):
        return False
    return isinstance(metadata, dict) and metadata.get(LEASE_RECLAIMED) is True
