"""Every usage field of the recorded streams priced as a hand computation says (money3,
probed and sound): the parser's ``Usage`` of each provider's recorded final usage block,
priced with ``turn_cost``, equals the figure worked out by hand from the raw block and
the list price (USD per million tokens; uncached input, cache reads, output with its
reasoning). DeepSeek and xAI have no list price: they are priced at the rates named."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from tests.helpers import chunk_events
from turnstate.core._cost import ModelPrice, turn_cost
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers._protocol import StreamParser
from turnstate.providers.anthropic import AnthropicStreamParser
from turnstate.providers.chat_completions._stream import ChatCompletionsStreamParser
from turnstate.providers.deepseek import DeepSeekAdapter
from turnstate.providers.gemini_interactions._parser import InteractionsStreamParser
from turnstate.providers.openai_responses._parser import ResponsesStreamParser


def _price(provider: str, model: str) -> ModelPrice:
    price = DEFAULT_REGISTRY.model(provider, model).price
    assert price is not None
    return price


FLASH = ModelPrice(input="0.30", cached_input="0.006", output="1.20")  # deepseek-flash peak
MINI = _price("openai-compatible", "gpt-4o-mini")

CASES: dict[str, tuple[str, str | None, Callable[[], StreamParser], ModelPrice, str]] = {
    # file, event key, parser, price, the hand computation (USD)
    "anthropic tool use": (  # 849 in, 47 out at $3 / $15
        "anthropic/anthropic-json-tool.1.chunks.txt", "type", AnthropicStreamParser,
        _price("anthropic", "claude-sonnet-4-5"), "0.003252"),
    "anthropic thinking": (  # 69 in, 53 out (thinking included) at $3 / $15
        "anthropic/anthropic-clear-thinking.1.chunks.txt", "type", AnthropicStreamParser,
        _price("anthropic", "claude-sonnet-4-5"), "0.001002"),
    "responses cache read and reasoning": (  # 4,040 + 3,072 cached in, 463 out at gpt-5
        "openai-responses/openai-phase.1.chunks.txt", "type", ResponsesStreamParser,
        _price("openai", "gpt-5"), "0.010064"),
    "responses compaction": (  # 1,305 + 49,792 cached in, 2,505 out at gpt-5
        "openai-responses/openai-compaction.1.chunks.txt", "type", ResponsesStreamParser,
        _price("openai", "gpt-5"), "0.03290525"),
    "gemini thoughts": (  # 7 in, 26 + 115 thought tokens out at 2.5 Flash
        "gemini-interactions/basic.chunks.txt", "event_type", InteractionsStreamParser,
        _price("gemini", "gemini-2.5-flash"), "0.0003546"),
    "chat reasoning beside completion": (  # 1 + 306 cached in, 26 + 227 out at 4o-mini
        "chat-completions/xai-tool-call.chunks.txt", None,
        lambda: ChatCompletionsStreamParser("openai-compatible"), MINI, "0.0001749"),
    "deepseek miss and reasoning": (  # 18 missed in, 219 out at the flash peak rate
        "deepseek/deepseek-reasoning.chunks.txt", None,
        lambda: DeepSeekAdapter().stream_parser(), FLASH, "0.0002682"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_recorded_usage_costs_what_the_hand_computation_says(
        recorded_dir: Path, name: str) -> None:
    path, key, make, price, expected = CASES[name]
    parser = make()
    for event in chunk_events(recorded_dir / path, event_key=key):
        parser.feed(event)
        if parser.done:
            break
    cost = turn_cost(parser.finish().usage, price)
    assert cost is not None and cost.total == Decimal(expected)
