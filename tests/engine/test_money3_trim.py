"""A chat at its context window keeps hitting the prompt cache (money3).

With ``overflow="trim"`` a stateless chat at its window drops its oldest whole turns.
Dropping the fewest that fit moved the start of the history on every turn, so every
request of a full chat missed the provider's prefix cache past the system prompt and
tools: on the emulators, an Anthropic chat of 200 turns in a 16,000-token window read
16% of its input from the cache from turn 101 on (it had read 91% before it was full)
and cost $3.06 per 50 turns instead of $0.64. Trims now cut at fixed points, a fifth of
the window apart (``core._overflow.trim_points``), so the history's first message stays
put while the chat grows a fifth of a window.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import attrs
import pytest

from turnstate.core import ContextSettings, TurnCompleted
from turnstate.core._context import OverflowPolicy
from turnstate.core._conversation import Message, MessageStatus, Role, TextPart
from turnstate.core._overflow import fit_context
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore

AT = datetime(2026, 12, 5, tzinfo=UTC)
WINDOW = 8_000
MODELS = {"anthropic": "claude-sonnet-4-5", "deepseek": "deepseek-chat",
          "openai-compatible": "gpt-4o-mini"}


async def full_chat(provider: str, turns: int) -> list[tuple[bool, int, int]]:
    """``(trimmed, input, cached)`` of each turn of a chat that outgrows ``WINDOW``."""
    listed = DEFAULT_REGISTRY.model(provider, MODELS[provider])
    registry = DEFAULT_REGISTRY.with_model(attrs.evolve(listed, name="small-window",
                                                        context_limit=WINDOW))
    async with EmulatedProviders([provider]) as stack, AiohttpTransport() as transport:
        emulator: Any = stack.emulators[provider]
        emulator.context_windows["small-window"] = WINDOW
        store = MemoryStore()
        engine = TurnEngine(store, stack.adapters, transport, registry=registry)
        chat = await store.create_chat(owner="alice")
        usages = []
        for turn in range(turns):
            final = None
            async for event in engine.run_turn(chat.id, TurnInput(
                    provider=provider, model="small-window",
                    system_prompt="You are terse. " * 100,
                    user_text=f"turn {turn}: " + "lorem ipsum dolor sit amet " * 20,
                    context=ContextSettings(overflow="trim",
                                            provider_compaction_enabled=False))):
                final = event
            assert isinstance(final, TurnCompleted), (turn, final)
            usages.append(final.stats.usage)
        answers = [m for m in await store.list_messages(chat.id) if m.role == "assistant"]
        return [('"contextTrimmed"' in (answer.provider_state or ""), usage.input_tokens,
                 usage.cached_input_tokens) for answer, usage in zip(answers, usages,
                                                                     strict=True)]


@pytest.mark.parametrize("provider", list(MODELS))
async def test_a_chat_at_its_window_keeps_reading_its_history_from_the_cache(
        provider: str) -> None:
    turns = await full_chat(provider, 90)
    first = next(n for n, (trimmed, _, _) in enumerate(turns) if trimmed)
    assert first < 50  # the chat reached its window
    full = turns[first + 1:]
    share = sum(cached for _, _, cached in full) / sum(tokens for _, tokens, _ in full)
    # Before: 0.16 (Anthropic), 0.3 (DeepSeek, OpenAI-compatible): every turn missed.
    assert share > 0.75, share


def _turn(seq: int) -> tuple[Message, Message]:
    def message(n: int, role: Role, text: str) -> Message:
        return Message(id=f"m{n}", chat_id="c", seq=n, role=role, parts=(TextPart(text=text),),
                       status=MessageStatus.COMPLETED, created_at=AT, updated_at=AT)
    return message(seq, Role.USER, "q" * 300), message(seq + 1, Role.ASSISTANT, "a" * 500)


def test_a_growing_chat_keeps_its_cut_for_a_fifth_of_a_window() -> None:
    """200 tokens a turn in a 10,000-token window: the first kept message moves once every
    ~10 turns (a fifth of the window), not on every turn as the fewest-turns cut did."""
    history: list[Message] = []
    firsts = []
    for turn in range(200):
        history.extend(_turn(2 * turn + 1))
        fit = fit_context(history, other_chars=400, context_limit=10_000,
                          policy=OverflowPolicy.TRIM)
        assert fit.fits and history[fit.dropped].role == Role.USER
        if fit.dropped:
            firsts.append(history[fit.dropped].seq)
    assert len(firsts) > 140
    assert len(set(firsts)) <= len(firsts) // 8  # before: one cut per turn

