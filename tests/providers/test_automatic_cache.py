"""OpenAI's and Gemini's implicit prefix caching as the emulators model it."""

from __future__ import annotations

from turnstate.emulators._prompt_cache import AutomaticCache

UNITS = ["s" * 4000, "u" * 800, "a" * 800, "u2" * 200]  # ~1,000 + 200 + 200 + 100 tokens


def test_a_repeated_prefix_is_cached_from_1024_tokens_in_128_token_steps() -> None:
    cache = AutomaticCache()
    assert cache.lookup("k", UNITS, 1500) == 0
    cache.store("k", UNITS[:3])
    cached = cache.lookup("k", UNITS, 1500)
    assert cached >= 1024 and (cached - 1024) % 128 == 0
    assert cached <= 1500 * 5600 // 6000


def test_routing_keys_do_not_share_a_cache() -> None:
    cache = AutomaticCache()
    cache.store("chat-a", UNITS)
    assert cache.lookup("chat-b", UNITS, 1500) == 0
    assert cache.lookup("", UNITS, 1500) == 0
    assert cache.lookup("chat-a", UNITS, 1500) > 0


def test_a_changed_or_reordered_prefix_misses() -> None:
    cache = AutomaticCache()
    cache.store("k", UNITS)
    assert cache.lookup("k", [UNITS[1], UNITS[0], *UNITS[2:]], 1500) == 0
    assert cache.lookup("k", ["t" + UNITS[0][1:], *UNITS[1:]], 1500) == 0


def test_below_the_minimum_nothing_is_cached_and_entries_expire() -> None:
    cache = AutomaticCache()
    cache.store("k", ["x" * 2000])
    assert cache.lookup("k", ["x" * 2000, "y"], 501) == 0  # ~500 tokens: too short
    cache.store("k", UNITS)
    cache.advance(601)
    assert cache.lookup("k", UNITS, 1500) == 0


def test_gemini_counts_without_steps() -> None:
    cache = AutomaticCache(step=1)
    cache.store("", UNITS[:3])
    assert cache.lookup("", UNITS, 1500) == 1500 * 5600 // 6000
