"""Reasoning tokens a Chat Completions server counts outside ``completion_tokens``.

``Usage.output_tokens`` is every generated token, reasoning included. OpenAI and DeepSeek
count reasoning inside ``completion_tokens`` (``total_tokens`` = prompt + completion);
xAI does not: its recorded streams and bodies report ``total_tokens`` = prompt +
completion + ``reasoning_tokens`` (307 + 26 + 227 = 560, and 307 + 26 + 255 = 588), and
their ``cost_in_usd_ticks`` is what grok-3-mini's list prices give only with the
reasoning billed as output. The parser took ``completion_tokens`` alone, so such a turn
reported 26 output tokens for 253 generated (fewer output tokens than reasoning tokens)
and an embedder's price for the model billed a tenth of the output.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import chunk_events
from turnstate.core._conversation import Usage
from turnstate.providers.chat_completions import ChatCompletionsStreamParser
from turnstate.providers.chat_completions._stream import read_chat_usage
from turnstate.providers.deepseek._codec import read_deepseek_usage

DATA = Path(__file__).resolve().parents[1] / "data" / "chat-completions"


def test_reasoning_outside_completion_tokens_is_output() -> None:
    parser = ChatCompletionsStreamParser("openai-compatible")
    for event in chunk_events(DATA / "reasoning-outside-completion.chunks.txt", event_key=None):
        parser.feed(event)
    assert parser.done
    assert parser.finish().usage == Usage(input_tokens=307, output_tokens=26 + 227,
                                          cached_input_tokens=306, reasoning_tokens=227)


def test_reasoning_inside_completion_tokens_is_counted_once() -> None:
    """OpenAI's and DeepSeek's totals: reasoning is part of ``completion_tokens``."""
    openai = {"prompt_tokens": 20, "completion_tokens": 300, "total_tokens": 320,
              "completion_tokens_details": {"reasoning_tokens": 256}}
    assert read_chat_usage(openai)[0] == Usage(input_tokens=20, output_tokens=300,
                                               reasoning_tokens=256)
    deepseek = {"prompt_tokens": 18, "completion_tokens": 219, "total_tokens": 237,
                "prompt_tokens_details": {"cached_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 205},
                "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 18}
    assert read_deepseek_usage(deepseek)[0].output_tokens == 219
    no_total = {"prompt_tokens": 20, "completion_tokens": 30,
                "completion_tokens_details": {"reasoning_tokens": 10}}
    assert read_chat_usage(no_total)[0].output_tokens == 30
