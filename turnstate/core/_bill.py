"""A chat's cost read back from its stored messages: what each answer's audit recorded.

Every answer, committed or aborted, carries its turn's cost in its audit record
(``messages.provider_state``, ``metadata.costUsd``) when the model is priced and the
whole bill is known (``TurnStats.cost``). These read it back for an embedder showing a
chat's cost, from ``Message``s or the lean ones the stores also return, without parsing
the audit themselves.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Protocol

from turnstate.core._cost import TurnCost, cost_from_json


class Audited(Protocol):
    """A stored message: ``Message`` or ``LeanMessage``."""

    @property
    def role(self) -> str: ...

    @property
    def provider_state(self) -> str | None: ...


def message_cost(message: Audited) -> TurnCost | None:
    """What the turn of this answer cost in USD, as its audit recorded it; None for a
    user message, an unpriced model, a turn whose bill is partly unknown (a response
    without usage, a request cut in flight) or an audit that cannot be read."""
    if message.role != "assistant" or not message.provider_state:
        return None
    try:
        audit = json.loads(message.provider_state)
    except ValueError:
        return None
    metadata = audit.get("metadata") if isinstance(audit, dict) else None
    return cost_from_json(metadata.get("costUsd")) if isinstance(metadata, dict) else None


def sent_counts(metadata: object) -> tuple[int, int, int]:
    """``(requests, request_bytes, retries)`` of an audit's metadata (its ``sent``):
    zeros for what it does not hold; a record written before retries were counted
    holds no ``retries`` and reads 0."""
    sent = metadata.get("sent") if isinstance(metadata, dict) else None
    if not isinstance(sent, dict):
        return 0, 0, 0
    values = [sent.get(key) for key in ("requests", "requestBytes", "retries")]
    requests, size, retries = (v if type(v) is int else 0 for v in values)
    return requests, size, retries


def chat_cost(messages: Iterable[Audited]) -> TurnCost | None:
    """The sum of ``message_cost`` over ``messages`` (a chat's, from
    ``Store.list_messages``), aborted answers included; None when none was priced. A
    floor when ``cost_unknown_turns`` of the same messages is not 0."""
    total: TurnCost | None = None
    for message in messages:
        cost = message_cost(message)
        if cost is not None:
            total = cost if total is None else total + cost
    return total


def cost_unknown_turns(messages: Iterable[Audited]) -> int:
    """How many answers among ``messages`` were billed an amount turnstate does not know:
    their audit says ``usageMissing`` (a response without usage, a request cut before
    its usage came, a turn another node reclaimed), names a ``serviceTier`` off the list
    price, or counts server tool calls billed apart or requests the model's price does
    not cover (``unpricedRequests``). ``chat_cost`` leaves them out, so
    it is a floor when this is not 0. An answer of a model the registry prices not at
    all is not counted: its bill is the provider's list, not unknown."""
    return sum(1 for m in messages if m.role == "assistant" and m.provider_state
               and any(key in m.provider_state for key in _UNKNOWN_KEYS)
               and _cost_unknown(m.provider_state))


_UNKNOWN_KEYS = ('"usageMissing"', '"serviceTier"', '"serverToolCalls"', '"unpricedRequests"')
"""Cheap substring tests first: only an audit that holds one of these is decoded."""


def _cost_unknown(text: str) -> bool:
    try:
        audit = json.loads(text)
    except ValueError:
        return False
    metadata = audit.get("metadata") if isinstance(audit, dict) else None
    if not isinstance(metadata, dict):
        return False
    calls, unpriced = metadata.get("serverToolCalls"), metadata.get("unpricedRequests")
    return (metadata.get("usageMissing") is True or isinstance(metadata.get("serviceTier"), str)
            or (type(calls) is int and calls > 0) or (type(unpriced) is int and unpriced > 0))
