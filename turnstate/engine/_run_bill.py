"""What a running turn has billed: the requests it sent, the usage and cost of what they
answered, cut and retried, and the record an aborted answer keeps of them.

``TurnBill`` is ``TurnRun``'s billing half (a mixin: the run's ``stats`` and
``metadata`` are its state), kept apart so the run's working memory and its money read
on their own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from turnstate.core._conversation import AuditState, Usage
from turnstate.core._cost import (
    UNPRICED_KEYS,
    UNPRICED_REQUESTS,
    CachePolicy,
    TurnCost,
    add_cost,
)
from turnstate.core._decisions import Strategy, TurnContext
from turnstate.core._events import NO_STATS, TurnStats
from turnstate.core._frozen import slot_maker
from turnstate.core._json import JsonObject
from turnstate.core._registry import ModelInfo
from turnstate.engine._turn_input import TurnInput

_NO_USAGE = NO_STATS.usage
USAGE_MISSING = "usageMissing"
"""The audit metadata key of a turn with a response whose usage never came (a server
that ignores ``stream_options.include_usage``, a null ``usage``): its cost is None."""
CUT_REQUESTS = "cutRequests"
"""The audit metadata key counting the turn's requests whose stream was cut before their
response (``TurnRun.absorb_cuts``): their known figures are in the usage, their output
an estimate over what streamed."""
_stats: Callable[[int, int, int, Usage, TurnCost | None, int], TurnStats] = \
    slot_maker(TurnStats)
_audit: Callable[[str, str, str, str, str, str | None, str | None, JsonObject | None],
                 AuditState] = slot_maker(AuditState)
class TurnBill:
    """The billing half of ``TurnRun`` (see the module docstring)."""

    turn: TurnInput
    ctx: TurnContext
    model_info: ModelInfo
    cache: CachePolicy
    cache_ttl: str
    strategy: Strategy | None
    degradation: str | None
    stats: TurnStats
    metadata: JsonObject
    in_flight: bool
    sent_at: datetime | None

    def count_request(self, size: int, sent_at: datetime | None = None) -> None:
        """One more call sent, at ``sent_at`` (the engine's clock): the start its
        requests are priced by when the transport records none (``request_start``)."""
        stats = self.stats  # built directly: attrs.evolve costs several times more
        # requests, request_bytes, tool_calls, usage, cost
        self.stats = _stats(stats.requests + 1, stats.request_bytes + size, stats.tool_calls,
                            stats.usage, stats.cost, stats.retries)
        self.in_flight = True
        self.sent_at = sent_at

    def request_start(self, started: datetime | None) -> datetime | None:
        """When a request of the current call started: the transport's record of the
        HTTP request (``AttemptBudget.started``: a retry's own), else the call's."""
        return started if started is not None else self.sent_at

    def _priced(self, total: TurnCost | None, so_far: Usage, usage: Usage,
                started: datetime | None) -> TurnCost | None:
        """``total`` (the cost of the usage billed ``so_far``) plus ``usage`` priced at
        the model's price as of ``started`` (``add_cost``); None once a request the turn
        billed had no price (``total`` None after some usage: an hour not known), never
        the later requests' alone."""
        if total is None and so_far is not _NO_USAGE:
            return None
        price = self.model_info.price
        cost = add_cost(total, usage, price, ttl=self.cache_ttl,
                        started=self.request_start(started))
        if cost is None and price is not None:  # a priced model, this request not
            counted = self.metadata.get(UNPRICED_REQUESTS)
            self.metadata[UNPRICED_REQUESTS] = (counted if type(counted) is int else 0) + 1
        return cost

    def count_retries(self, sent: int) -> None:
        """One call sent ``sent`` HTTP requests (its ``AttemptBudget``): those beyond
        the first are retries (``TurnStats.retries``)."""
        if sent > 1:
            stats = self.stats
            self.stats = _stats(stats.requests, stats.request_bytes, stats.tool_calls,
                                stats.usage, stats.cost, stats.retries + sent - 1)

    def absorb_cuts(self, cuts: Sequence[Usage | None],
                    starts: Sequence[datetime | None] = ()) -> None:
        """Requests the provider answered but whose stream was cut before the response
        (``provider_batches``' ``cuts``: a connection lost, a timeout, a malformed frame,
        a stop, a lost lease, a restart's first try): billed all the same. What a cut
        request's stream said (Anthropic's ``message_start`` input and cache counts, its
        output estimated over what streamed) joins the turn's usage and cost; one that
        said nothing (OpenAI's ``response.created``, Gemini's ``interaction.created``, a
        Chat Completions chunk) leaves the turn without a cost (``USAGE_MISSING``), as a
        response without usage does, never the $0 of nothing known. ``starts``: when
        each cut request started, in the same order (``AttemptBudget.cut_starts``)."""
        if not cuts:
            return
        self.in_flight = False  # the cut request is billed here, not unknown (``_cut_call``)
        stats = self.stats
        usage, cost = stats.usage, stats.cost
        for index, billed in enumerate(cuts):
            if billed is None or billed.input_tokens <= 0:
                self.metadata[USAGE_MISSING] = True
                continue
            started = starts[index] if index < len(starts) else None
            cost = self._priced(cost, usage, billed, started)
            usage = billed if usage is _NO_USAGE else usage + billed
        counted = self.metadata.get(CUT_REQUESTS)
        self.metadata[CUT_REQUESTS] = (counted if type(counted) is int else 0) + len(cuts)
        if USAGE_MISSING in self.metadata or _unpriced(self.metadata):
            cost = None
        self.stats = _stats(stats.requests, stats.request_bytes, stats.tool_calls, usage, cost,
                            stats.retries)

    def _cut_call(self) -> None:
        """A request cut in flight by a stop or a cancel: the provider bills what it read
        and wrote of it, which turnstate never learns, so the turn's cost is unknown (None,
        not the answered requests' alone) and its audit says so (``usageMissing``)."""
        self.in_flight = False
        self.metadata[USAGE_MISSING] = True
        stats = self.stats
        self.stats = _stats(stats.requests, stats.request_bytes, stats.tool_calls,
                            stats.usage, None, stats.retries)

    def billed_record(self) -> tuple[Usage | None, AuditState | None]:
        """What an aborted turn's answered requests billed, and its audit record (no
        cursor; metadata: what it sent, its cost), for its aborted answer; two Nones when
        no request was answered (nothing billed that turnstate knows of)."""
        stats = self.stats
        unknown = USAGE_MISSING in self.metadata  # billed, for figures nobody sent
        if stats.usage is _NO_USAGE and not unknown:
            return None, None
        metadata: JsonObject = {"sent": _sent(stats)}
        if stats.cost is not None:
            metadata["costUsd"] = stats.cost.as_json()
        for key in (USAGE_MISSING, CUT_REQUESTS, *UNPRICED_KEYS):
            if key in self.metadata:
                metadata[key] = self.metadata[key]
        audit = _audit(self.turn.provider, self.turn.model,
                       (self.strategy or Strategy.REPLAY)._value_, self.ctx.system_prompt_hash,
                       self.ctx.toolset_hash, None, self.degradation, metadata)
        return None if stats.usage is _NO_USAGE else stats.usage, audit



def _sent(stats: TurnStats) -> JsonObject:
    """The audit's ``sent``: ``retries`` only when there were (absent reads as 0, as in
    the records written before it was counted)."""
    sent: JsonObject = {"requests": stats.requests, "requestBytes": stats.request_bytes}
    if stats.retries:
        sent["retries"] = stats.retries
    return sent


def _unpriced(metadata: JsonObject) -> bool:
    """A response billed beyond its tokens' list price (another service tier, calls of
    the provider's own tools): ``UNPRICED_KEYS``."""
    return bool(metadata) and not metadata.keys().isdisjoint(UNPRICED_KEYS)
