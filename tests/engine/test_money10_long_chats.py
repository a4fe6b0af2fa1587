"""Every turn of a long chat with tools is priced as its provider bills it (money10).

A 20-turn chat per provider runs through ``TurnEngine`` against the emulator over
loopback: a ~3,000-token system prompt, three tools, tool calls on most turns (parallel
calls and loops of three rounds among them), an image at ``IMAGE_TURN`` (not on
DeepSeek), a request refused once with a 503 and retried, and a system prompt changed at
``CHANGED_TURN``; Anthropic also with one-hour entries. A transport that records the
raw answer frames gives each request's usage as the wire said it; the test prices them
itself, from the rates published on each provider's pricing page (``PUBLISHED``, typed
here and not read from ``turnstate.core._prices``), and checks:

* each turn's ``TurnStats.cost`` and its stored ``costUsd`` equal the sum of its
  requests' prices (a retried request's answer once), to the last decimal;
* the share of each turn's input read from the cache from turn 2 on (except the turn
  whose system prompt changed, which misses on every provider: the system prompt comes
  before the history): above ``CACHE_FLOOR`` and below 1 (the new question is input).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, ClassVar

import attrs
import pytest

from turnstate.core import ContextSettings, TurnCompleted
from turnstate.core._conversation import ImagePart, TextPart, Tool, ToolSpec
from turnstate.emulators import EmulatedProviders, Fault
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers import RetryPolicy
from turnstate.providers._protocol import ErrorClassifier, HttpRequest, SseEvent
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore, decode_audit

MILLION = Decimal(1_000_000)
START = datetime(2026, 12, 1, 0, 48, tzinfo=UTC)
"""The engine's clock at a chat's first request; each request moves it a minute, so the
DeepSeek chat crosses 01:00 UTC, the start of its peak hours, mid-chat."""


@attrs.frozen
class Rates:
    """USD per million tokens, as the pricing pages publish them."""

    input: Decimal
    cached: Decimal
    output: Decimal
    write_5m: Decimal | None = None
    write_1h: Decimal | None = None


def _d(text: str) -> Decimal:
    return Decimal(text)


PUBLISHED: dict[str, tuple[str, Rates]] = {
    # platform.claude.com pricing: Sonnet 4.5 $3 / $15; reads 0.1x, writes 1.25x (5m), 2x (1h).
    "anthropic": ("claude-sonnet-4-5", Rates(_d("3"), _d("0.30"), _d("15"), _d("3.75"), _d("6"))),
    # platform.openai.com/docs/pricing: gpt-4.1 $2 / $0.50 cached / $8.
    "openai": ("gpt-4.1", Rates(_d("2"), _d("0.50"), _d("8"))),
    # gpt-4o-mini $0.15 / $0.075 cached / $0.60.
    "openai-compatible": ("gpt-4o-mini", Rates(_d("0.15"), _d("0.075"), _d("0.60"))),
    # ai.google.dev pricing: gemini-2.5-flash $0.30 / $0.03 cached / $2.50 (thinking included).
    "gemini": ("gemini-2.5-flash", Rates(_d("0.30"), _d("0.03"), _d("2.50"))),
    # api-docs.deepseek.com pricing: deepseek-flash off-peak $0.15 miss / $0.003 hit / $0.60.
    "deepseek": ("deepseek-flash", Rates(_d("0.15"), _d("0.003"), _d("0.60"))),
}
DEEPSEEK_PEAK = ((1, 4), (6, 10))  # UTC hours at twice the off-peak rates

SYSTEM = "".join(f"Rule {n}: answer plainly, cite the tool you used, keep the user's units, "
                 "and never invent a figure the tools did not give. " for n in range(1, 101))
CHANGED_TURN = 12
IMAGE_TURN = 7
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
RETRIED_TURN = 5
TURNS = 20


async def _tool(args: dict[str, Any]) -> Any:
    return {"city": args.get("city"), "forecast": "mild, light wind, 18 C"}


def _tools() -> tuple[Tool, ...]:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    return tuple(Tool(spec=ToolSpec(name=name, description=f"The {name} service. " * 8,
                                    parameters=schema), handler=_tool)
                 for name in ("weather", "calendar", "currency"))


def _question(turn: int) -> str:
    text = (f"Turn {turn}: here is what I am planning this week, with the details that "
            f"matter for the trip and the budget, item {turn} of the list. ") * 2
    if turn % 4 == 1:  # turns 1, 5, 9, ...: a loop of three rounds of two calls
        return f"[[call:weather*2]] [[rounds:3]] {text}"
    if turn % 2 == 1:
        return f'[[call:currency {{"city": "City {turn}"}}]] {text}'
    return text


class RecordingTransport(AiohttpTransport):
    """Keeps each answered request's raw frames, as the provider sent them."""

    FINISHES_ON_SEND: ClassVar[bool] = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.answers: list[list[Any]] = []

    async def stream_batches(self, request: HttpRequest, classify: ErrorClassifier,
                             ) -> AsyncGenerator[list[SseEvent], bool | None]:
        frames: list[Any] = []
        self.answers.append(frames)
        inner = super().stream_batches(request, classify)
        try:
            batch = await inner.__anext__()
            while True:
                frames.extend(json.loads(event.data) for event in batch
                              if event.data.startswith("{"))
                batch = await inner.asend((yield batch))
        except StopAsyncIteration:
            return
        finally:
            await inner.aclose()


def _usages(value: Any) -> list[dict[str, Any]]:
    """Every ``usage`` object in a frame, outermost first."""
    found: list[dict[str, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "usage" and isinstance(item, dict):
                found.append(item)
            found += _usages(item)
    elif isinstance(value, list):
        for item in value:
            found += _usages(item)
    return found


def _wire_usage(frames: list[Any]) -> dict[str, Any]:
    """The request's usage: later frames' fields over earlier ones' (Anthropic's
    ``message_delta`` carries the output count; the others send one final usage)."""
    merged: dict[str, Any] = {}
    for frame in frames:
        for usage in _usages(frame):
            merged.update(usage)
    assert merged, "an answered request without usage"
    return merged


def _n(usage: dict[str, Any], *path: str) -> int:
    value: Any = usage
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return int(value or 0)


def published_price(provider: str, usage: dict[str, Any], started: datetime) -> Decimal:
    """One request's price from its wire usage and the published rates."""
    rates = PUBLISHED[provider][1]
    if provider == "anthropic":  # input_tokens is the uncached part
        one_hour = _n(usage, "cache_creation", "ephemeral_1h_input_tokens")
        writes = _n(usage, "cache_creation_input_tokens")
        assert rates.write_5m is not None and rates.write_1h is not None
        cents = (rates.input * _n(usage, "input_tokens")
                 + rates.cached * _n(usage, "cache_read_input_tokens")
                 + rates.write_5m * (writes - one_hour) + rates.write_1h * one_hour
                 + rates.output * _n(usage, "output_tokens"))
    elif provider == "openai":  # cached tokens are inside input_tokens
        cached = _n(usage, "input_tokens_details", "cached_tokens")
        cents = (rates.input * (_n(usage, "input_tokens") - cached) + rates.cached * cached
                 + rates.output * _n(usage, "output_tokens"))
    elif provider == "gemini":  # cached inside the input; thinking billed as output
        cached = _n(usage, "total_cached_tokens")
        prompt = _n(usage, "total_input_tokens") + _n(usage, "total_tool_use_tokens")
        cents = (rates.input * (prompt - cached) + rates.cached * cached
                 + rates.output * (_n(usage, "total_output_tokens")
                                   + _n(usage, "total_thought_tokens")))
    elif provider == "deepseek":  # hit + miss = prompt_tokens
        peak = any(start <= started.hour < end for start, end in DEEPSEEK_PEAK)
        cents = (rates.input * _n(usage, "prompt_cache_miss_tokens")
                 + rates.cached * _n(usage, "prompt_cache_hit_tokens")
                 + rates.output * _n(usage, "completion_tokens")) * (2 if peak else 1)
    else:  # Chat Completions: cached inside prompt_tokens
        cached = _n(usage, "prompt_tokens_details", "cached_tokens")
        cents = (rates.input * (_n(usage, "prompt_tokens") - cached) + rates.cached * cached
                 + rates.output * _n(usage, "completion_tokens"))
    return cents / MILLION


def _input_split(provider: str, usage: dict[str, Any]) -> tuple[int, int]:
    """``(input tokens, read from the cache)`` of one request."""
    if provider == "anthropic":
        read = _n(usage, "cache_read_input_tokens")
        return (_n(usage, "input_tokens") + read + _n(usage, "cache_creation_input_tokens"),
                read)
    if provider == "openai":
        return _n(usage, "input_tokens"), _n(usage, "input_tokens_details", "cached_tokens")
    if provider == "gemini":
        return _n(usage, "total_input_tokens"), _n(usage, "total_cached_tokens")
    if provider == "deepseek":
        return _n(usage, "prompt_tokens"), _n(usage, "prompt_cache_hit_tokens")
    return _n(usage, "prompt_tokens"), _n(usage, "prompt_tokens_details", "cached_tokens")


@attrs.frozen
class TurnFigures:
    cost: Decimal | None
    stored: Any
    published: Decimal
    requests: int
    ratio: float


async def _no_sleep(_: float) -> None:
    return None


async def long_chat(provider: str, cache: str = "auto") -> list[TurnFigures]:
    model = PUBLISHED[provider][0]
    async with EmulatedProviders([provider]) as stack, RecordingTransport(
            sleep=_no_sleep, retry=RetryPolicy(max_attempts=3)) as transport:
        emulator: Any = stack.emulators[provider]

        def clock() -> datetime:  # a minute per request the provider received
            return START + timedelta(minutes=emulator.requests.total)

        store = MemoryStore(clock=clock)
        engine = TurnEngine(store, stack.adapters, transport, clock=clock)
        chat = await store.create_chat(owner="alice")
        figures: list[TurnFigures] = []
        for turn in range(1, TURNS + 1):
            answered = len(transport.answers)
            received = emulator.requests.total
            if turn == RETRIED_TURN:
                emulator.faults.push(Fault(status=503, body={"error": {"message": "busy"}}))
            system = SYSTEM if turn < CHANGED_TURN else SYSTEM.replace("plainly", "briefly")
            parts: tuple[Any, ...] = (TextPart(text=_question(turn)),)
            if turn == IMAGE_TURN and provider != "deepseek":  # DeepSeek reads no images
                parts += (ImagePart(media_type="image/png", data=PNG),)
            final = None
            async for event in engine.run_turn(chat.id, TurnInput(
                    provider=provider, model=model, system_prompt=system,
                    content=parts, tools=_tools(),
                    context=ContextSettings(provider_compaction_enabled=False, cache=cache))):
                final = event
            assert isinstance(final, TurnCompleted), (provider, turn, final)
            answers = transport.answers[answered:]
            # The emulator's requests of this turn, in order; a refused one answered nothing.
            refused = 1 if turn == RETRIED_TURN else 0
            assert emulator.requests.total - received == len(answers) + refused
            published = Decimal(0)
            tokens = cached = 0
            for index, frames in enumerate(answers):
                usage = _wire_usage(frames)
                # The request answered was the emulator's (received + index + refused)th:
                # the clock read when it was sent.
                started = START + timedelta(minutes=received + index + refused)
                published += published_price(provider, usage, started)
                whole, read = _input_split(provider, usage)
                tokens, cached = tokens + whole, cached + read
            answer = (await store.list_messages(chat.id))[-1]
            stored = (decode_audit(answer.provider_state or "").metadata or {}).get("costUsd")
            figures.append(TurnFigures(
                cost=None if final.stats.cost is None else final.stats.cost.total,
                stored=stored, published=published, requests=len(answers),
                ratio=cached / max(1, tokens)))
        return figures


PROVIDERS = [(provider, "auto") for provider in PUBLISHED] + [("anthropic", "1h")]


CACHE_FLOOR = {"anthropic": 0.85, "openai": 0.9, "openai-compatible": 0.85, "gemini": 0.9,
               "deepseek": 0.9}


@pytest.mark.parametrize(("provider", "cache"), PROVIDERS)
async def test_every_turn_of_a_long_chat_costs_what_its_requests_billed(provider: str,
                                                                        cache: str) -> None:
    figures = await long_chat(provider, cache)
    assert [f.requests for f in figures][:5] == [4, 1, 2, 1, 4]
    for turn, f in enumerate(figures, start=1):
        assert f.cost == f.published, (provider, turn, f)
        assert f.stored is not None and Decimal(f.stored["total"]) == f.published, (turn, f)
    ratios = {turn: round(f.ratio, 3) for turn, f in enumerate(figures, start=1)}
    kept = {turn: ratio for turn, ratio in ratios.items() if turn not in (1, CHANGED_TURN)}
    assert min(kept.values()) >= CACHE_FLOOR[provider], (provider, ratios)
    # Every turn sends a new question at the input rate: never all of it read. Before,
    # the Anthropic emulator counted an image's base64 in its prefix, so from the image
    # turn on every turn "read" more than its whole input (1.0, nothing billed as input).
    assert all(f.ratio < 1 for f in figures), (provider, ratios)
