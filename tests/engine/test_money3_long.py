"""200-turn chats with tool calls and images, as an operator who pays the bill runs them
(money3): each provider's emulator over loopback, a 16,000-token window (the registry's
model under another name, the emulator enforcing the same window), the reference
server's ``overflow="trim"``, a tool call every fifth turn and an image every twentieth.

Every turn commits; the requests stay bounded once the window is full (they do not grow
with the chat); and the stateless providers keep reading most of their input from the
prompt cache after the window filled (before the fixed trim points, 16-33%: every turn
moved the start of the history). Anthropic with compaction and OpenAI with compaction
are covered by ``test_long_chat.py``."""

from __future__ import annotations

import base64
from typing import Any

import attrs
import pytest

from turnstate.core import ContextSettings, TurnCompleted
from turnstate.core._conversation import TextPart, Tool, ToolSpec
from turnstate.core._media import ImagePart
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDw"
                       "ADhgGAWjR9awAAAABJRU5ErkJggg==")
WINDOW, TURNS = 16_000, 200
MODELS = {"anthropic": "claude-sonnet-4-5", "deepseek": "deepseek-chat",
          "openai-compatible": "gpt-4o-mini", "gemini": "gemini-2.5-flash"}


async def _forecast(args: dict[str, Any]) -> Any:
    return {"city": args.get("city"), "forecast": "mild " * 40}


TOOLS = (Tool(spec=ToolSpec(name="weather", description="The weather service.",
                            parameters={"type": "object",
                                        "properties": {"city": {"type": "string"}}}),
              handler=_forecast),)


def content(provider: str, turn: int) -> tuple[Any, ...]:
    text = f"turn {turn}: " + "lorem ipsum dolor sit amet " * 20
    parts: tuple[Any, ...] = (TextPart(text=("[[call:weather]] " if turn % 5 == 0 else "")
                                       + text),)
    if turn % 20 == 0 and provider != "deepseek":  # DeepSeek takes no images
        parts += (ImagePart(media_type="image/png", data=PNG),)
    return parts


@pytest.mark.parametrize("provider", list(MODELS))
async def test_a_200_turn_chat_with_tools_and_images_stays_whole_bounded_and_cached(
        provider: str) -> None:
    listed = DEFAULT_REGISTRY.model(provider, MODELS[provider])
    registry = DEFAULT_REGISTRY.with_model(attrs.evolve(listed, name="small-window",
                                                        context_limit=WINDOW))
    async with EmulatedProviders([provider]) as stack, AiohttpTransport() as transport:
        emulator: Any = stack.emulators[provider]
        emulator.context_windows["small-window"] = WINDOW
        store = MemoryStore()
        engine = TurnEngine(store, stack.adapters, transport, registry=registry)
        chat = await store.create_chat(owner="alice")
        finals: list[TurnCompleted] = []
        for turn in range(1, TURNS + 1):
            final = None
            async for event in engine.run_turn(chat.id, TurnInput(
                    provider=provider, model="small-window",
                    system_prompt="You are terse. " * 100, content=content(provider, turn),
                    tools=TOOLS, recover_tool_results=True,
                    context=ContextSettings(overflow="trim"))):
                final = event
            assert isinstance(final, TurnCompleted), (turn, final)
            finals.append(final)
    per_request = [f.stats.request_bytes / f.stats.requests for f in finals]
    assert max(per_request[100:]) <= 1.2 * max(per_request[40:100])  # bounded
    late = [f.stats.usage for f in finals[100:]]
    share = sum(u.cached_input_tokens for u in late) / sum(u.input_tokens for u in late)
    if provider != "gemini":  # Gemini's cursor turns report their new input alone
        assert share > 0.7, share
    assert len(await store.list_messages(chat.id)) == 2 * TURNS
