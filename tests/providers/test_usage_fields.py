"""Every parser maps its wire usage onto the same ``Usage`` meaning (see ``Usage``):
``input_tokens`` is the whole input, cache reads and writes are parts of it."""

from __future__ import annotations

from turnstate.core import Usage
from turnstate.providers.anthropic._stream import read_usage
from turnstate.providers.chat_completions._stream import read_chat_usage
from turnstate.providers.deepseek._codec import read_deepseek_usage
from turnstate.providers.gemini_interactions._parser import usage_of as gemini_usage
from turnstate.providers.openai_responses._assemble import usage_of as openai_usage


def test_anthropic_adds_reads_and_writes_to_the_input_and_keeps_them_apart() -> None:
    usage = read_usage({"input_tokens": 21, "cache_creation_input_tokens": 3000,
                        "cache_read_input_tokens": 9000, "output_tokens": 40})
    assert usage == Usage(input_tokens=12_021, cached_input_tokens=9000,
                          cache_write_tokens=3000, output_tokens=40)
    assert usage.uncached_input_tokens == 21


def test_openai_responses_reads_cached_and_written_details() -> None:
    usage = openai_usage({"input_tokens": 2000, "output_tokens": 5, "input_tokens_details":
                          {"cached_tokens": 1536, "cache_write_tokens": 0}})
    assert (usage.input_tokens, usage.cached_input_tokens, usage.cache_write_tokens) == (
        2000, 1536, 0)
    written = openai_usage({"input_tokens": 2000, "input_tokens_details":
                            {"cached_tokens": 0, "cache_write_tokens": 1920}})
    assert written.cache_write_tokens == 1920


def test_chat_completions_and_deepseek_count_the_whole_prompt() -> None:
    usage, _ = read_chat_usage({"prompt_tokens": 374, "completion_tokens": 60,
                                "prompt_tokens_details": {"cached_tokens": 256}})
    assert (usage.input_tokens, usage.cached_input_tokens, usage.cache_write_tokens) == (
        374, 256, 0)
    deep, metadata = read_deepseek_usage({"prompt_tokens": 374, "completion_tokens": 60,
                                          "prompt_cache_hit_tokens": 256,
                                          "prompt_cache_miss_tokens": 118})
    assert (deep.input_tokens, deep.cached_input_tokens, deep.cache_hit_tokens) == (374, 256, 256)
    assert metadata["promptCacheMissTokens"] == 118


def test_gemini_counts_cached_tokens_inside_the_input() -> None:
    usage = gemini_usage({"total_input_tokens": 5000, "total_cached_tokens": 4096,
                          "total_output_tokens": 7})
    assert (usage.input_tokens, usage.cached_input_tokens, usage.cache_write_tokens) == (
        5000, 4096, 0)
