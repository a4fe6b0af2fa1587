"""Prompt caches that behave like the providers', so tests and benchmarks measure money.

Two kinds:

* ``BreakpointCache``, Anthropic's explicit caching. A prefix is cached only where a
  block carries ``cache_control`` (at most ``MAX_BREAKPOINTS`` of them: more is a 400
  with Anthropic's message), and only when the prefix is at least the model's minimum
  cacheable length (``turnstate.core._prices.MIN_CACHE_TOKENS``; a shorter one caches
  nothing and is billed as plain input). A breakpoint reads the longest entry found at
  it or up to ``LOOKBACK_BLOCKS`` blocks before it; the entry at every cacheable
  breakpoint is written (the tokens past the read, up to the last cacheable breakpoint,
  are billed as a write). Entries live for their ``ttl`` (5 minutes, or 1 hour), and a
  read refreshes them. The prefix is tools, then system, then the messages' blocks, each
  block hashed without its ``cache_control`` (moving a breakpoint changes no prefix)
  and counted as the request's input is: an image or a document as its tokens
  (``token_view``), not its base64.
* ``AutomaticCache``, OpenAI's and Gemini's implicit caching: the longest prefix of a
  request that an earlier request of the same routing key (OpenAI's
  ``prompt_cache_key``; none for Gemini) had, counted only from ``minimum`` tokens and,
  for OpenAI, in steps of ``step`` tokens above it (1,024 and 128). Entries live for
  ``ttl`` seconds (OpenAI keeps prefixes 5 to 10 minutes of inactivity).

A chained emulator (Responses, Interactions) keeps each conversation's prefix chain
(``Prefix``, one link per unit) with the conversation, and uses ``lookup_prefix`` /
``store_prefix``: a continuation hashes and stores only its own units, and its lookup
walks back from its end to the longest remembered prefix (its parent's, normally). Such a
lookup refreshes only the prefix it found, where ``lookup`` refreshes every matched one.

Tokens are about four characters each, as everywhere in the emulators. A test moves
time with ``advance``.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from turnstate.core._json import canonical_json
from turnstate.core._prices import DEFAULT_ANTHROPIC_MIN_CACHE_TOKENS, MIN_CACHE_TOKENS
from turnstate.emulators._media import token_view

MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
TOO_MANY_BREAKPOINTS = "A maximum of {} blocks with cache_control may be provided. Found {}."


def tokens_of(chars: int) -> int:
    return math.ceil(chars / 4)


def _chain(previous: str, unit: str) -> str:
    return hashlib.sha256(f"{previous}\0{unit}".encode()).hexdigest()


@attrs.frozen(eq=False)
class Prefix:
    """A prompt's prefix up to one unit: its chained hash, its characters, the prefix one
    unit shorter. A stored conversation keeps its own units' prefixes and points at the
    rest, so a continuation hashes only what it adds."""

    digest: str
    chars: int
    previous: Prefix | None


def extend_prefix(start: Prefix | None, units: Iterable[str]) -> Prefix:
    """``start`` followed by ``units`` (at least one unit overall)."""
    tip = start
    for unit in units:
        digest = _chain(tip.digest if tip else "", unit)
        tip = Prefix(digest, (tip.chars if tip else 0) + len(unit), tip)
    if tip is None:
        msg = "a prefix needs at least one unit"
        raise ValueError(msg)
    return tip


@attrs.frozen(kw_only=True)
class CacheFigures:
    """One request's input split: read from the cache, written to it, and the total."""

    read: int = 0
    write: int = 0
    total: int = 0


class _Clocked:
    def __init__(self, clock: Callable[[], float] | None) -> None:
        self._clock = clock or time.monotonic
        self._offset = 0.0

    def now(self) -> float:
        return self._clock() + self._offset

    def advance(self, seconds: float) -> None:
        """Move the cache's time forward (entries expire as if ``seconds`` passed)."""
        self._offset += seconds


@attrs.frozen(kw_only=True)
class _Block:
    digest: str
    chars: int  # the prefix's characters up to and including this block
    ttl: str | None  # the block's breakpoint lifetime, None when it has none


def _strip(block: Any) -> tuple[Any, str | None]:
    if not isinstance(block, Mapping):
        return block, None
    control = block.get("cache_control")
    if not isinstance(control, Mapping):
        return block, None
    ttl = str(control.get("ttl") or "5m")
    return {k: v for k, v in block.items() if k != "cache_control"}, ttl


def anthropic_blocks(body: Mapping[str, Any], messages: Sequence[Any]) -> Iterable[Any]:
    """The request's prefix in caching order: tools, system blocks, message blocks."""
    yield from body.get("tools") or ()
    system = body.get("system")
    if isinstance(system, list):
        yield from system
    elif system:
        yield {"type": "text", "text": system}
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):
            for block in content:
                yield {"role": message.get("role"), **block} if isinstance(block, Mapping) \
                    else block
        else:
            yield {"role": message.get("role") if isinstance(message, Mapping) else None,
                   "text": content}


def breakpoint_count(body: Mapping[str, Any]) -> int:
    return sum(1 for block in anthropic_blocks(body, body.get("messages") or ())
               if _strip(block)[1] is not None)


class BreakpointCache(_Clocked):
    """Anthropic's explicit prompt cache (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        super().__init__(clock)
        self._entries: dict[str, tuple[float, float]] = {}  # digest -> (expires, ttl)

    def clear(self) -> None:
        self._entries.clear()

    def _blocks(self, body: Mapping[str, Any], messages: Sequence[Any]) -> list[_Block]:
        out: list[_Block] = []
        digest, chars = "", 0
        for raw in anthropic_blocks(body, messages):
            block, ttl = _strip(raw)
            # Counted as the request's input is (an image as its tokens, not its base64:
            # a prefix holding one read more tokens than the request had); the digest
            # of the view still tells two images apart.
            text = canonical_json(token_view(block, "anthropic"))
            digest, chars = _chain(digest, text), chars + len(text)
            out.append(_Block(digest=digest, chars=chars, ttl=ttl))
        return out

    def apply(self, body: Mapping[str, Any], messages: Sequence[Any], total: int) -> CacheFigures:
        """Read and write the cache for one request of ``total`` input tokens."""
        blocks = self._blocks(body, messages)
        marked = [i for i, block in enumerate(blocks) if block.ttl is not None]
        now = self.now()
        hit = 0
        for index in marked:
            for j in range(index, max(-1, index - LOOKBACK_BLOCKS), -1):
                entry = self._entries.get(blocks[j].digest)
                if entry is not None and entry[0] > now:
                    self._entries[blocks[j].digest] = (now + entry[1], entry[1])  # refreshed
                    hit = max(hit, j + 1)
                    break
        minimum = minimum_tokens(str(body.get("model") or "")) * 4
        written = 0
        for index in marked:
            block = blocks[index]
            if block.chars >= minimum:
                ttl = TTL_SECONDS.get(block.ttl or "5m", TTL_SECONDS["5m"])
                current = self._entries.get(block.digest, (0.0, 0.0))
                self._entries[block.digest] = max(current, (now + ttl, ttl))
                written = max(written, index + 1)
        read = tokens_of(blocks[hit - 1].chars) if hit else 0
        write = tokens_of(blocks[written - 1].chars) - read if written > hit else 0
        read, write = min(read, total), min(write, max(0, total - read))
        return CacheFigures(read=read, write=write, total=total)


def minimum_tokens(model: str) -> int:
    """Anthropic's minimum cacheable prompt for ``model`` (the registry's figure)."""
    return MIN_CACHE_TOKENS.get(("anthropic", model), DEFAULT_ANTHROPIC_MIN_CACHE_TOKENS)


class AutomaticCache(_Clocked):
    """OpenAI's and Gemini's implicit prefix caching (see the module docstring)."""

    def __init__(self, *, minimum: int = 1024, step: int = 128, ttl: float = 600.0,
                 clock: Callable[[], float] | None = None) -> None:
        super().__init__(clock)
        self.minimum, self.step, self.ttl = minimum, step, ttl
        self._entries: dict[tuple[str, str], float] = {}

    def clear(self) -> None:
        self._entries.clear()

    def _prefixes(self, units: Sequence[str]) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        digest, chars = "", 0
        for unit in units:
            digest, chars = _chain(digest, unit), chars + len(unit)
            out.append((digest, chars))
        return out

    def lookup(self, key: str, units: Sequence[str], total: int) -> int:
        """The cached tokens of a request of ``total`` input tokens whose prompt is
        ``units`` (canonical texts, in order): the matched share of the prompt's
        characters, counted in the request's tokens."""
        now, best, prefixes = self.now(), 0, self._prefixes(units)
        for digest, chars in prefixes:
            expires = self._entries.get((key, digest))
            if expires is not None and expires > now:
                best = chars
                self._entries[(key, digest)] = now + self.ttl
        return self._counted(best, prefixes[-1][1] if prefixes else 0, total)

    def lookup_prefix(self, key: str, tip: Prefix, total: int,
                      ttl: float | None = None) -> int:
        """``lookup`` for a prompt given as its prefix chain: the longest remembered
        prefix is found walking back from ``tip`` (a continuation finds its parent's at
        once), and refreshed for ``ttl`` seconds (the cache's own by default)."""
        now, best, ttl = self.now(), 0, self.ttl if ttl is None else ttl
        prefix: Prefix | None = tip
        while prefix is not None:
            expires = self._entries.get((key, prefix.digest))
            if expires is not None and expires > now:
                best = prefix.chars
                self._entries[(key, prefix.digest)] = now + ttl
                break
            prefix = prefix.previous
        return self._counted(best, tip.chars, total)

    def store_prefix(self, key: str, tip: Prefix, count: int,
                     ttl: float | None = None) -> None:
        """Remember the last ``count`` prefixes up to ``tip`` (a request's new units and
        the one it continued from; the shorter ones were remembered when they were new)
        for ``ttl`` seconds (the cache's own by default)."""
        expires = self.now() + (self.ttl if ttl is None else ttl)
        prefix: Prefix | None = tip
        for _ in range(count):
            if prefix is None:
                break
            self._entries[(key, prefix.digest)] = expires
            prefix = prefix.previous

    def _counted(self, best: int, whole: int, total: int) -> int:
        cached = min(total, total * best // whole) if whole else 0
        if cached < self.minimum:
            return 0
        return cached - (cached - self.minimum) % self.step if self.step > 1 else cached

    def store(self, key: str, units: Sequence[str]) -> None:
        """Remember every prefix of ``units`` (a request's prompt, then its output)."""
        expires = self.now() + self.ttl
        for digest, _ in self._prefixes(units):
            self._entries[(key, digest)] = expires
