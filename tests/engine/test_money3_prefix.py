"""Every request starts with the whole of the one before it (money3, probed and sound).

A prefix cache (DeepSeek's disk cache, OpenAI's and Gemini's implicit caches, Anthropic's
breakpoints) hits only up to the first changed byte. Over a chat with tools (parallel
calls, two rounds), reasoning and images, on each provider's emulator over loopback,
each request's prompt (tools, system prompt, then every message or input item, compared
as canonical JSON with Anthropic's ``cache_control`` markers taken off) begins with every
item of the previous request's prompt: within a turn's tool loop and from one turn to
the next. The durable providers are compared replay to replay (the stored cursor is
cleared before every turn). The one documented exception is Anthropic's thinking: a
finished turn's thinking blocks are not sent again (the API drops them), so they are
left out of the comparison.
"""

from __future__ import annotations

import base64
from itertools import pairwise
from typing import Any

import pytest

from turnstate.core import ContextSettings, TurnCompleted
from turnstate.core._conversation import TextPart, Tool, ToolSpec
from turnstate.core._json import canonical_json
from turnstate.core._media import ImagePart
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDw"
                       "ADhgGAWjR9awAAAABJRU5ErkJggg==")
SETUPS: dict[str, tuple[str, dict[str, Any], bool]] = {  # model, adapter options, images
    "anthropic": ("claude-sonnet-4-5", {"thinking_budget_tokens": 2048}, True),
    "deepseek": ("deepseek-reasoner", {}, False),  # DeepSeek takes no images
    "openai-compatible": ("gpt-4o-mini", {}, True),
    "openai": ("gpt-5", {"reasoning": {"effort": "low", "summary": "auto"},
                         "include_encrypted_reasoning": True}, True),
    "gemini": ("gemini-2.5-flash", {}, True),
}


async def _forecast(args: dict[str, Any]) -> Any:
    return {"city": args.get("city"), "forecast": "mild, 18 C"}


TOOLS = tuple(Tool(spec=ToolSpec(name=name, description=f"The {name} service.",
                                 parameters={"type": "object",
                                             "properties": {"city": {"type": "string"}}}),
                   handler=_forecast) for name in ("weather", "calendar"))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def prompt(provider: str, body: dict[str, Any]) -> list[str]:
    """The request's prompt as a list of canonical items, in the provider's order."""
    body = _plain(body)
    if provider == "anthropic":
        system = body.get("system")
        items = [canonical_json(body.get("tools")), canonical_json(
            system if isinstance(system, str) else system[0]["text"])]
        for message in body["messages"]:
            items += [canonical_json([message["role"], block]) for block in message["content"]
                      if block.get("type") not in ("thinking", "redacted_thinking")]
        return items
    if provider in ("openai", "gemini"):
        system = body.get("instructions") or body.get("system_instruction")
        return [canonical_json(body.get("tools")), canonical_json(system),
                *map(canonical_json, body["input"])]
    return [canonical_json(body.get("tools")), *map(canonical_json, body["messages"])]


def question(turn: int) -> str:
    text = f"[[think]] Turn {turn}: the plan for the week, item {turn}."
    return f"[[call:weather*2]] [[rounds:2]] {text}" if turn % 3 == 0 else text


@pytest.mark.parametrize("provider", list(SETUPS))
async def test_each_request_starts_with_the_whole_previous_one(provider: str) -> None:
    model, options, images = SETUPS[provider]
    async with EmulatedProviders([provider], {provider: options}) as stack, \
            AiohttpTransport() as transport:
        store = MemoryStore()
        engine = TurnEngine(store, stack.adapters, transport)
        chat = await store.create_chat(owner="alice")
        for turn in range(1, 11):
            if provider in ("openai", "gemini"):
                await store.clear_provider_state(chat.id, reason="every turn a replay")
            content: tuple[Any, ...] = (TextPart(text=question(turn)),)
            if images and turn % 4 == 0:
                content += (ImagePart(media_type="image/png", data=PNG),)
            final = None
            async for event in engine.run_turn(chat.id, TurnInput(
                    provider=provider, model=model, system_prompt="Be exact. " * 50,
                    content=content, tools=TOOLS,
                    context=ContextSettings(provider_compaction_enabled=False))):
                final = event
            assert isinstance(final, TurnCompleted), (turn, final)
        emulator: Any = stack.emulators[provider]
        bodies = [r.json for r in emulator.requests if isinstance(r.json, dict)
                  and not r.json.get("previous_response_id")
                  and not r.json.get("previous_interaction_id")]
    assert len(bodies) >= 10
    for before, after in pairwise(bodies):
        old, new = prompt(provider, before), prompt(provider, after)
        assert new[:len(old)] == old
