"""Where an Anthropic request asks for prompt caching: its ``cache_control`` breakpoints.

Anthropic caches only a prefix that ends at a block marked ``cache_control`` (tools,
then system, then messages, in that order), and looks for an earlier entry only about
20 blocks back from a breakpoint. With the ``auto`` policy a request carries:

1. one breakpoint after tools and system (on the system block; on the last tool when
   there is no system prompt);
2. one on the end of this turn's new user message: the request writes everything up to
   it, so every tool iteration of the turn, and the next turn, read it instead of
   paying the question at the input rate first and writing it a turn later;
3. on a turn's first request, one on the end of the history's last user message (the
   previous turn's question): where the previous turn's first request wrote. The next
   turn's question may be far more than 20 blocks after it (a long tool loop), and the
   loop's own entries do not match any more when thinking blocks were dropped from the
   finished turn, so without this read point such a turn wrote the whole chat again;
4. in a local loop, one on the newest tool result, so the next iteration reads it, and
   from the second iteration one on the previous iteration's newest result (where the
   previous request wrote), however many blocks the latest iteration added.

The chat's very first request is the exception to "none": Anthropic's cache is shared by
every request of the workspace with the same prefix, so when this adapter sent the same
tools and system prompt with a breakpoint within the entry's lifetime (another chat's
request: ``WarmPrefixes``), the first request marks them too and reads them at 0.1x
instead of paying them at the input rate. A prefix not sent so recently gets no
breakpoint, so a one-turn chat on a cold prefix still costs the uncached price.

Never more than four (the API's limit): the message breakpoints are taken in the order
4 (newest, previous), 2, 3 until the limit. A breakpoint whose prefix is shorter than the
model's minimum cacheable length (``ModelInfo.min_cache_tokens``, estimated at four
characters per token over the request's JSON) is left out: it would cache nothing. The
chat's very first request (no history, no loop) carries none: a write costs 1.25x the
input rate and nothing is known to read it, so a one-turn chat costs what an uncached
one does; its second request writes.

``off`` sends no breakpoint and a plain-string ``system``. ``5m`` / ``1h`` choose the
entries' lifetime (``auto`` is five minutes, the API's default, written without ``ttl``).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

import attrs

from turnstate.core._context import CHARS_PER_TOKEN
from turnstate.core._cost import CachePolicy
from turnstate.core._media import DeferredMedia
from turnstate.providers._protocol import ProviderCall
from turnstate.providers.chat_completions._codec import quote

MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
"""How far back from a breakpoint Anthropic looks for an earlier cache entry."""


def cache_control(policy: CachePolicy) -> str:
    """The ``cache_control`` object as compact JSON (``ttl`` only when it is ``1h``)."""
    if policy is CachePolicy.TTL_1H:
        return '{"type":"ephemeral","ttl":"1h"}'
    return '{"type":"ephemeral"}'


def mark_block(block: str, control: str) -> str:
    """A block's compact JSON object with ``cache_control`` added as its last key."""
    return f'{block[:-1]},"cache_control":{control}}}'


@attrs.frozen(kw_only=True)
class CachePlan:
    """Which breakpoints a request carries (see the module docstring)."""

    control: str = ""
    minimum_chars: int = 0

    @property
    def enabled(self) -> bool:
        return bool(self.control)

    def fits(self, prefix_chars: int) -> bool:
        """A prefix this long is cacheable."""
        return self.enabled and prefix_chars >= self.minimum_chars


def plan_for(call: ProviderCall) -> CachePlan:
    """The plan of ``call``: none when caching is off or for the chat's first request."""
    if not call.cache.enabled or is_first_request(call):
        return CachePlan()
    return cacheable_plan(call)


def is_first_request(call: ProviderCall) -> bool:
    """The chat's very first request: no history, no loop, no parts of this turn."""
    return not call.history and not call.loop_messages and not call.turn_parts


def cacheable_plan(call: ProviderCall) -> CachePlan:
    """The breakpoints' control and the model's minimum, whatever the request."""
    return CachePlan(control=cache_control(call.cache),
                     minimum_chars=call.model.min_cache_tokens * CHARS_PER_TOKEN)


TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
WARM_MARGIN_SECONDS = 30.0
"""Taken off an entry's lifetime before a prefix counts as warm: the clocks of this
process and Anthropic's, and a request's time in flight, differ by that much at most."""


class WarmPrefixes:
    """The tools-and-system prefixes an adapter sent with a breakpoint, and when: each
    such request wrote or refreshed the provider's cache entry for the prefix, which
    lives ``ttl`` from then. At most ``size`` prefixes, the oldest sent forgotten first
    (a forgotten prefix only misses a read: its first requests go unmarked)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, size: int = 256) -> None:
        self.clock, self.size = clock, size
        self._sent: OrderedDict[tuple[str, ...], float] = OrderedDict()

    def warm(self, key: tuple[str, ...], ttl: str) -> bool:
        """``key`` was sent with a breakpoint recently enough that its entry still lives."""
        sent = self._sent.get(key)
        lifetime = TTL_SECONDS.get(ttl, TTL_SECONDS["5m"]) - WARM_MARGIN_SECONDS
        return sent is not None and self.clock() - sent < lifetime

    def sent(self, key: tuple[str, ...]) -> None:
        """``key`` goes out with a breakpoint now."""
        self._sent.pop(key, None)
        self._sent[key] = self.clock()
        if len(self._sent) > self.size:
            self._sent.popitem(last=False)


Spot = tuple[int, int]
"""Where a block ends in a request's rendered messages: ``(message index, the length the
message's JSON had when the block was its last)``. Merging a later block into the same
message appends after it, so the block's closing brace stays at ``length - 3``."""


def spot_of(out: list[str]) -> Spot:
    """The spot of the last block of ``out``'s last message."""
    return len(out) - 1, len(out[-1])


def place_breakpoints(out: list[str], plan: CachePlan, prefix_chars: int,
                      spots: list[Spot | None], room: int, *,
                      media: DeferredMedia | None = None) -> None:
    """Mark, in ``out``, the first ``room`` distinct ``spots`` (in order of preference)
    whose prefix the plan finds cacheable (``prefix_chars``: what precedes the messages).

    With ``media`` (``out`` written inside ``deferred_media``: its images and files as
    marks), the prefixes are counted as sent: each mark as its media's base64 (memory8),
    so the breakpoints stay where the messages written whole put them."""
    chosen: list[Spot] = []
    starts: dict[int, int] = {}
    for spot in spots:
        if spot is None or spot in chosen or len(chosen) >= room:
            continue
        index, end = spot
        if index not in starts:
            starts[index] = sum(map(len, out[:index]))
            if media is not None:
                starts[index] += sum(media.grown(message) for message in out[:index])
        grown = 0 if media is None else media.grown(out[index], end)
        if plan.fits(prefix_chars + starts[index] + end + grown):
            chosen.append(spot)
    for index, end in sorted(chosen, reverse=True):  # later spots first: offsets hold
        message = out[index]
        out[index] = f'{message[:end - 3]},"cache_control":{plan.control}{message[end - 3:]}'


def system_json(system_prompt: str, control: str | None) -> str:
    """The ``system`` value: a string, or one text block carrying the breakpoint."""
    if control is None:
        return quote(system_prompt)
    return f'[{{"type":"text","text":{quote(system_prompt)},"cache_control":{control}}}]'


def marked_tools(tools_json: str, control: str) -> str:
    """The tools array (compact JSON, non-empty) with its last tool marked."""
    return f'{tools_json[:-2]},"cache_control":{control}}}]'
