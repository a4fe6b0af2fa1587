"""What a turn cost in money: list prices as data, and the arithmetic over ``Usage``.

Prices are USD per million tokens, as ``Decimal`` (never floats: a sum of many small
turns must not drift). A ``ModelPrice`` says where its figures come from and when they
were read; the registry carries one per model it knows, and an embedder replaces them
with ``Registry.with_price`` (negotiated rates, a new list price). A model without a
price has no cost: ``turn_cost`` returns None rather than a guess.

Billing follows ``Usage``'s meaning of the fields (``turnstate.core._conversation``):
cache reads at the cached-input rate, cache writes at the write rate of the cache's
time to live, the rest of the input at the input rate, all output at the output rate.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

import attrs

from turnstate.core._conversation import Message, Usage
from turnstate.core._errors import ConfigurationError
from turnstate.core._frozen import slot_maker

MILLION = Decimal(1_000_000)


class CachePolicy(StrEnum):
    """How a request asks the provider to cache its prompt.

    ``auto``: the provider's caching, placed by turnstate (Anthropic: breakpoints with
    the default five-minute lifetime; OpenAI: a ``prompt_cache_key``; Gemini and
    DeepSeek: their implicit caching over a stable prefix). ``off``: no breakpoints and
    no cache key (implicit caching cannot be turned off). ``5m`` / ``1h``: ``auto`` with
    Anthropic breakpoints of that lifetime (the other providers treat them as ``auto``).
    ``adaptive``: ``auto`` whose Anthropic breakpoints live an hour when the chat's
    previous answer ended more than ``ADAPTIVE_SLOW_SECONDS`` (and less than an hour)
    before the turn began, five minutes otherwise (``adaptive_policy``): in a chat
    slower than the five-minute lifetime every turn re-wrote its whole prefix at 1.25x
    the input rate, more than no cache at all.
    """

    AUTO = "auto"
    OFF = "off"
    TTL_5M = "5m"
    TTL_1H = "1h"
    ADAPTIVE = "adaptive"

    @property
    def enabled(self) -> bool:
        return self is not CachePolicy.OFF

    @property
    def ttl(self) -> str:
        """The Anthropic ``cache_control.ttl``: ``1h`` when asked for, else ``5m``."""
        return "1h" if self is CachePolicy.TTL_1H else "5m"


ADAPTIVE_SLOW_SECONDS = 270.0
"""A gap between a chat's answer and its next turn past which the ``adaptive`` policy
writes one-hour entries: the five-minute lifetime less a margin for the clocks and the
request's time in flight (the entry may have expired by the time the request lands)."""
ONE_HOUR_SECONDS = 3600.0


def adaptive_policy(history: Sequence[Message], now: datetime | None) -> CachePolicy:
    """What ``adaptive`` means for a turn whose committed ``history`` ends as stored and
    that began at ``now``: ``1h`` when its last message was written between
    ``ADAPTIVE_SLOW_SECONDS`` and an hour before (its five-minute entries are gone, a
    one-hour entry would still be read, and the next turn is taken to come as late),
    else ``auto`` (a new chat, a quick reply, or a chat idle for more than an hour: its
    next turn would miss an hour's entry too, and five-minute writes cost less)."""
    if not history or now is None:
        return CachePolicy.AUTO
    gap = (now - history[-1].updated_at).total_seconds()
    if ADAPTIVE_SLOW_SECONDS < gap < ONE_HOUR_SECONDS:
        return CachePolicy.TTL_1H
    return CachePolicy.AUTO


MAX_RATE = Decimal(1_000_000)
"""The highest rate a ``ModelPrice`` takes, USD per million tokens: far above any list
price, and low enough that no turn's tokens times it overflows ``Decimal``."""


def _decimal(value: Decimal | int | float | str) -> Decimal:
    if isinstance(value, Decimal):
        return value
    if isinstance(value, bool):
        return Decimal("NaN")  # not a rate: refused by ``_rate``
    try:
        return Decimal(str(value))
    except ArithmeticError:  # decimal.InvalidOperation: not a number
        return Decimal("NaN")


def _optional_decimal(value: Decimal | int | float | str | None) -> Decimal | None:
    return None if value is None else _decimal(value)


def _rate(_: object, attribute: attrs.Attribute[Any], value: Decimal | None) -> None:
    """A rate is a finite number of USD from 0 to ``MAX_RATE`` (``sNaN``, an infinity
    or ``1e999999`` failed ``turn_cost`` after the provider had answered; ``NaN`` or a
    negative rate made NaN or negative costs)."""
    if value is not None and not (value.is_finite() and 0 <= value <= MAX_RATE):
        msg = (f"ModelPrice.{attribute.name} must be a number of USD from 0 to "
               f"{MAX_RATE} per million tokens")
        raise ConfigurationError(msg)


def _long_rates(instance: ModelPrice, _: attrs.Attribute[Any], __: object) -> None:
    """The long-context tier comes whole (a threshold of at least one token and its three
    rates) or not at all: half a tier would price long requests at a guess."""
    given = (instance.long_context_tokens, instance.long_input, instance.long_cached_input,
             instance.long_output)
    if all(value is None for value in given):
        return
    tokens = instance.long_context_tokens
    if any(value is None for value in given) or type(tokens) is not int or tokens < 1:
        msg = ("ModelPrice's long-context tier needs long_context_tokens (a whole number of "
               "tokens, at least 1) with long_input, long_cached_input and long_output")
        raise ConfigurationError(msg)


def _peak_hours(instance: ModelPrice, _: attrs.Attribute[Any], __: object) -> None:
    """Peak rates come with their hours (UTC, whole hours, start before end, within the
    day) and are one level deep: rates that depend on the hour without the hours, or
    hours without the rates, would price part of the day at a guess."""
    peak, hours = instance.peak, instance.peak_hours_utc
    days, dates = instance.peak_weekdays, instance.off_peak_dates
    if not (type(days) is tuple and all(type(day) is int and 1 <= day <= 7 for day in days)
            and type(dates) is frozenset
            and all(type(day) is date for day in dates)):  # a datetime is not a day
        msg = ("ModelPrice.peak_weekdays must be a tuple of ISO weekdays (1 Monday to 7 "
               "Sunday) and off_peak_dates a frozenset of datetime.date")
        raise ConfigurationError(msg)
    if peak is None and not hours:
        return
    well_formed = (type(hours) is tuple and bool(hours) and all(
        type(window) is tuple and len(window) == 2
        and all(type(hour) is int for hour in window) and 0 <= window[0] < window[1] <= 24
        for window in hours))
    if (peak is None or not isinstance(peak, ModelPrice) or peak.peak is not None
            or not well_formed):
        msg = ("ModelPrice's peak rates need peak (a ModelPrice without peak rates of its "
               "own) with peak_hours_utc, a non-empty tuple of (start, end) whole UTC hours, "
               "0 <= start < end <= 24")
        raise ConfigurationError(msg)


def _tokens(_: object, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None and (type(value) is not int or value < 1):
        msg = f"ModelPrice.{attribute.name} must be a whole number of tokens, at least 1"
        raise ConfigurationError(msg)


@attrs.frozen(kw_only=True)
class ModelPrice:
    """A model's list prices, USD per million tokens.

    Attributes:
        input: uncached input.
        cached_input: input read from the prompt cache.
        output: generated tokens, reasoning included.
        cache_write_5m, cache_write_1h: input written to the cache with that lifetime
            (Anthropic); None means writes cost the input rate (providers that do not
            bill writes apart).
        source: where the figures were read (a URL or a document's name).
        read_on: the date they were read, ISO ``YYYY-MM-DD``.
        long_context_tokens: a request whose input (cached part included) is above this
            many tokens bills all its tokens at the ``long_*`` rates (Gemini Pro's
            prompts above 200,000 tokens); None: one tier.
        long_input, long_cached_input, long_output: that tier's rates.
        peak: the rates of the peak hours (DeepSeek's), None when the rates do not
            depend on the hour; these rates are then the off-peak ones.
        peak_hours_utc: the peak hours, ``(start, end)`` whole hours of the UTC day,
            start inclusive, end exclusive. A request is priced by the hour it started
            (``at``); a request whose start is not known has no price.
        peak_weekdays: the ISO weekdays of the request's UTC start (1 Monday to 7
            Sunday) on which the peak hours apply; other days are off-peak in full
            (DeepSeek: Monday to Friday). Every day by default.
        off_peak_dates: UTC dates off-peak in full whatever their weekday (DeepSeek's
            Chinese public holidays, which an embedder supplies: none are known here).
        unpriced_above: a request whose input (cached part included) is above this many
            tokens has no price: the provider bills it at a tier whose rates are not
            known here (Anthropic's long context); None: every request is priced.
    """

    input: Decimal = attrs.field(converter=_decimal, validator=_rate)
    cached_input: Decimal = attrs.field(converter=_decimal, validator=_rate)
    output: Decimal = attrs.field(converter=_decimal, validator=_rate)
    cache_write_5m: Decimal | None = attrs.field(default=None, converter=_optional_decimal,
                                                 validator=_rate)
    cache_write_1h: Decimal | None = attrs.field(default=None, converter=_optional_decimal,
                                                 validator=_rate)
    source: str = ""
    read_on: str = ""
    long_context_tokens: int | None = None
    long_input: Decimal | None = attrs.field(default=None, converter=_optional_decimal,
                                             validator=_rate)
    long_cached_input: Decimal | None = attrs.field(default=None, converter=_optional_decimal,
                                                    validator=_rate)
    long_output: Decimal | None = attrs.field(default=None, converter=_optional_decimal,
                                              validator=[_rate, _long_rates])
    peak: ModelPrice | None = None
    peak_hours_utc: tuple[tuple[int, int], ...] = ()
    peak_weekdays: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7)
    off_peak_dates: frozenset[date] = attrs.field(default=frozenset(), validator=_peak_hours)
    unpriced_above: int | None = attrs.field(default=None, validator=_tokens)

    def at(self, started: datetime | None) -> ModelPrice | None:
        """The rates of a request that started at ``started`` (an aware datetime), as a
        price that no longer depends on the hour: the peak rates when its UTC hour is in
        ``peak_hours_utc`` on one of ``peak_weekdays`` not in ``off_peak_dates``, else
        these. A price that does not depend on the hour is
        itself whatever ``started`` says; one that does has none for a request whose
        start is unknown or naive (no guess)."""
        if self.peak is None:
            return self
        if started is None or started.utcoffset() is None:
            return None
        start = started.astimezone(UTC)
        hour = start.hour
        if (any(begin <= hour < end for begin, end in self.peak_hours_utc)
                and start.isoweekday() in self.peak_weekdays
                and start.date() not in self.off_peak_dates):
            return self.peak
        return attrs.evolve(self, peak=None, peak_hours_utc=())

    def rates(self, input_tokens: int) -> tuple[Decimal, Decimal, Decimal]:
        """The input, cached-input and output rates of a request of ``input_tokens``."""
        tokens, long = self.long_context_tokens, self.long_output
        long_input, long_cached = self.long_input, self.long_cached_input
        if (tokens is None or input_tokens <= tokens or long is None or long_input is None
                or long_cached is None):
            return self.input, self.cached_input, self.output
        return long_input, long_cached, long  # a rate of 0 is a rate, not "no tier"

    def cache_write(self, ttl: str, input_rate: Decimal | None = None) -> Decimal:
        """The write rate for a cache of lifetime ``ttl`` (``5m`` or ``1h``); without
        one, the request's input rate (``input_rate``, its tier's; else ``input``)."""
        rate = self.cache_write_1h if ttl == "1h" else self.cache_write_5m
        if rate is not None:
            return rate
        return self.input if input_rate is None else input_rate


@attrs.frozen(kw_only=True)
class TurnCost:
    """A turn's cost in USD and what it is made of (the parts add up to ``total``)."""

    input: Decimal
    cached_input: Decimal
    cache_write: Decimal
    output: Decimal

    @property
    def total(self) -> Decimal:
        return self.input + self.cached_input + self.cache_write + self.output

    def __add__(self, other: TurnCost) -> TurnCost:
        return TurnCost(input=self.input + other.input,
                        cached_input=self.cached_input + other.cached_input,
                        cache_write=self.cache_write + other.cache_write,
                        output=self.output + other.output)

    def as_json(self) -> dict[str, str]:
        """Decimal strings (exact), for the audit, the server and ``--json``."""
        return {"total": usd_text(self.total), "input": usd_text(self.input),
                "cachedInput": usd_text(self.cached_input),
                "cacheWrite": usd_text(self.cache_write), "output": usd_text(self.output)}


LIST_PRICE_TIERS = frozenset({"default", "standard", "auto", ""})
"""Service tiers billed at the list price (OpenAI ``default``; Anthropic and Gemini
``standard``; ``auto``, a tier not resolved, taken as the default)."""

SERVICE_TIER = "serviceTier"
"""The audit metadata key of a response billed at another service tier (``flex``,
``priority``, ``scale``, ``batch``): the list price does not cover it."""


SERVER_TOOL_CALLS = "serverToolCalls"
"""The audit metadata key counting a response's calls of the provider's own tools (web
search, code execution, file search, ...): billed per call or per query beside the
tokens, at fees the registry has no figure for, so the turn has no cost."""

UNPRICED_REQUESTS = "unpricedRequests"
"""The audit metadata key counting a turn's requests its model's price does not cover
(a start not known for a price by the hour, an input above ``unpriced_above``): billed,
at rates not known here, so the turn has no cost."""

UNPRICED_KEYS = (SERVICE_TIER, SERVER_TOOL_CALLS, UNPRICED_REQUESTS)
"""Audit metadata keys that leave a turn without a cost (billed, but not at the list
price of its tokens alone)."""


def server_tool_metadata(calls: int) -> dict[str, int]:
    """``{"serverToolCalls": calls}`` when the response called provider-side tools."""
    return {SERVER_TOOL_CALLS: calls} if calls else {}


def tier_metadata(tier: object) -> dict[str, str]:
    """``{"serviceTier": tier}`` for a response that names a service tier the list price
    does not cover; ``{}`` for the standard tier or none named. Its turn then has no cost
    (``TurnStats.cost`` None: no price rather than the standard tier's)."""
    if not isinstance(tier, str) or tier in LIST_PRICE_TIERS:
        return {}
    return {SERVICE_TIER: tier}


def usd_text(amount: Decimal) -> str:
    """``amount`` as plain decimal text, no exponent and no trailing zeros (``0.0035``)."""
    if not amount and not amount.is_signed():  # a cost a turn did not incur: most parts
        return "0"
    return format(amount.normalize(), "f")


_cost: Callable[[Decimal, Decimal, Decimal, Decimal], TurnCost] = slot_maker(TurnCost)
"""``TurnCost`` without attrs' ``__init__`` (``_frozen``): one a priced response."""


def turn_cost(usage: Usage, price: ModelPrice | None, *, ttl: str = "5m",
              started: datetime | None = None) -> TurnCost | None:
    """What one request's ``usage`` costs at ``price`` (its tier chosen by its input, its
    peak or off-peak rates by ``started``, when the request started: ``ModelPrice.at``);
    None when the model has no price, or has rates by the hour and ``started`` is not
    known. A turn of several requests adds theirs up (``add_cost``): a tier and an hour
    are a request's, not a turn's."""
    if price is not None and price.peak is not None:
        price = price.at(started)
    if price is None or (price.unpriced_above is not None
                         and usage.input_tokens > price.unpriced_above):
        return None
    input_rate, cached_rate, output_rate = price.rates(usage.input_tokens)
    writes, one_hour = usage.cache_write_tokens, usage.cache_write_1h_tokens
    if one_hour:  # the provider said which writes live an hour: each part at its rate
        write = (price.cache_write("5m", input_rate) * (writes - one_hour)
                 + price.cache_write("1h", input_rate) * one_hour) / MILLION
    else:
        write = price.cache_write(ttl, input_rate) * writes / MILLION
    return _cost(  # input, cached_input, cache_write, output
        input_rate * usage.uncached_input_tokens / MILLION,
        cached_rate * usage.cached_input_tokens / MILLION,
        write,
        output_rate * usage.output_tokens / MILLION)


def add_cost(total: TurnCost | None, usage: Usage, price: ModelPrice | None, *,
             ttl: str = "5m", started: datetime | None = None) -> TurnCost | None:
    """``total`` plus what one more request's ``usage`` costs (``turn_cost``); None when
    unpriced. ``total`` None is no request priced yet: a caller whose earlier request
    had no price keeps None itself (``TurnBill``)."""
    cost = turn_cost(usage, price, ttl=ttl, started=started)
    if cost is None or total is None:
        return cost
    return _cost(total.input + cost.input, total.cached_input + cost.cached_input,
                 total.cache_write + cost.cache_write, total.output + cost.output)


def cost_from_json(value: object) -> TurnCost | None:
    """A ``TurnCost`` from what ``as_json`` wrote; None for anything else."""
    if not isinstance(value, dict):
        return None
    try:
        amounts = [Decimal(value[key]) for key in ("input", "cachedInput", "cacheWrite",
                                                   "output")
                   if isinstance(value.get(key), str)]
    except ArithmeticError:  # decimal.InvalidOperation: not a number
        return None
    if len(amounts) != 4 or not all(amount.is_finite() for amount in amounts):
        return None
    return _cost(*amounts)


def audit_cost_text(audit_text: str | None) -> str:
    """A turn's cost as ``inspect`` words it from its audit: ``$0.0123``; with requests
    cut mid-answer (``cutRequests``) a floor, ``$0.0123 or more``; ``unknown`` when a
    request billed figures nobody reported (``usageMissing``); else ``n/a (no price)``."""
    metadata = _audit_metadata(audit_text)
    if metadata.get("leaseReclaimed") is True:
        return "unknown (the turn lost its lease; what it billed was never recorded)"
    if metadata.get("usageMissing") is True:
        return "unknown (the provider reported no usage for a request it billed)"
    tier = metadata.get(SERVICE_TIER)
    if isinstance(tier, str):
        return f"n/a (billed at the {tier!r} service tier, which has no list price here)"
    calls = metadata.get(SERVER_TOOL_CALLS)
    if type(calls) is int and calls > 0:
        return f"n/a ({calls} call(s) of the provider's own tools, billed at fees not listed here)"
    unpriced = metadata.get(UNPRICED_REQUESTS)
    if type(unpriced) is int and unpriced > 0:
        return f"n/a ({unpriced} request(s) billed at rates not listed here)"
    total = audit_cost(audit_text)
    if total is None:
        return "n/a (no price)"
    cut = metadata.get("cutRequests")
    if type(cut) is int and cut > 0:
        return f"${total} or more ({cut} request(s) cut mid-answer, their output estimated)"
    return f"${total}"


def _audit_metadata(audit_text: str | None) -> dict[str, Any]:
    try:
        audit = json.loads(audit_text) if audit_text else None
    except ValueError:
        return {}
    metadata = audit.get("metadata") if isinstance(audit, dict) else None
    return metadata if isinstance(metadata, dict) else {}


def audit_cost(audit_text: str | None) -> str | None:
    """A committed turn's cost in USD as its audit recorded it (``costUsd.total`` of
    ``messages.provider_state``), or None (unpriced, aborted, or not readable)."""
    try:
        audit = json.loads(audit_text) if audit_text else None
    except ValueError:
        return None
    metadata = audit.get("metadata") if isinstance(audit, dict) else None
    cost = metadata.get("costUsd") if isinstance(metadata, dict) else None
    total = cost.get("total") if isinstance(cost, dict) else None
    return total if isinstance(total, str) else None
