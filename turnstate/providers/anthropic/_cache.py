"""Where an Anthropic request asks for prompt caching: its ``cache_control`` breakpoints.

Anthropic caches only a prefix that ends at a block marked ``cache_control`` (tools,
then system, then messages, in that order). With the ``auto`` policy a request carries:

1. one breakpoint after tools and system (on the system block; on the last tool when
   there is no system prompt);
2. a rolling one on the last block of the committed history, before this turn's new
   input: the next turn and every tool iteration of this one read it;
3. in a local loop, one on the newest tool result, so the next iteration reads it;
4. in a loop of two iterations or more, one on the previous iteration's newest tool
   result as well: the cache entry the previous iteration wrote is then checked where it
   is, however many blocks the latest iteration added (Anthropic looks back only about
   20 blocks from a breakpoint for an earlier entry; past that, a prefix is written again).

Never more than four (the API's limit). A breakpoint whose prefix is shorter than the
model's minimum cacheable length (``ModelInfo.min_cache_tokens``, estimated at four
characters per token over the request's JSON) is left out: it would cache nothing. The
chat's very first request (no history, no loop) carries none: a write costs 1.25x the
input rate and nothing is known to read it, so a one-turn chat costs what an uncached
one does; its second request writes.

``off`` sends no breakpoint and a plain-string ``system``. ``5m`` / ``1h`` choose the
entries' lifetime (``auto`` is five minutes, the API's default, written without ``ttl``).
"""

from __future__ import annotations

import attrs

from turnstate.core._context import CHARS_PER_TOKEN
from turnstate.core._cost import CachePolicy
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


def mark_last_block(message: str, control: str) -> str:
    """A message's compact JSON (``{"role":..,"content":[..,{..}]}``) with its last
    block marked."""
    return f'{message[:-3]},"cache_control":{control}}}]}}'


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
    if not call.cache.enabled or (not call.history and not call.loop_messages
                                  and not call.turn_parts):
        return CachePlan()
    return CachePlan(control=cache_control(call.cache),
                     minimum_chars=call.model.min_cache_tokens * CHARS_PER_TOKEN)


def system_json(system_prompt: str, control: str | None) -> str:
    """The ``system`` value: a string, or one text block carrying the breakpoint."""
    if control is None:
        return quote(system_prompt)
    return f'[{{"type":"text","text":{quote(system_prompt)},"cache_control":{control}}}]'


def marked_tools(tools_json: str, control: str) -> str:
    """The tools array (compact JSON, non-empty) with its last tool marked."""
    return f'{tools_json[:-2]},"cache_control":{control}}}]'
