"""Each emulator streams the corpus's shapes on request, and each adapter's parser reads
them as the corpus tests say: the finish reason and the parts of one response, over
loopback. (Whole turns through the engine: tests/engine/test_emulated_shapes.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from turnstate.core._conversation import OpaquePart, TextPart, ToolCallPart, ToolSpec
from turnstate.core._decisions import Strategy
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.emulators._conversation_model import REFUSAL
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.providers import ProviderCall, ProviderResponse
from turnstate.providers._transport import AiohttpTransport

MODELS = {"openai": "gpt-4o", "gemini": "gemini-2.5-flash", "openai-compatible": "gpt-4o-mini",
          "deepseek": "deepseek-chat", "anthropic": "claude-sonnet-4-5"}
WEATHER = ToolSpec(name="weather", parameters={"type": "object",
                                               "properties": {"city": {"type": "string"}}})
Stack = tuple[EmulatedProviders, AiohttpTransport]


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with EmulatedProviders() as providers, AiohttpTransport() as transport:
        yield providers, transport


async def respond(stack: Stack, provider: str, text: str) -> ProviderResponse:
    providers, transport = stack
    adapter = providers.adapters[provider]
    durable = provider in ("openai", "gemini")
    call = ProviderCall(strategy=Strategy.REPLAY if durable else Strategy.LOCAL_LOOP,
                        model=DEFAULT_REGISTRY.model(provider, MODELS[provider]),
                        system_prompt="", tools=(WEATHER,), user_text=text)
    parser = adapter.stream_parser()
    async for event in transport.stream(adapter.build_request(call), adapter.classify_error):
        parser.feed(event)
        if parser.done:
            break
    return parser.finish()


def _texts(response: ProviderResponse) -> list[str]:
    return [p.text for p in response.parts if isinstance(p, TextPart)]


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_cutoff_ends_with_length(stack: Stack, provider: str) -> None:
    """``[[cutoff]]``: Responses ``response.incomplete`` (max_output_tokens), Interactions
    ``incomplete``, Chat Completions ``length``, Anthropic ``max_tokens``."""
    response = await respond(stack, provider, "[[cutoff]] tell me about the three causes")
    assert response.finish_reason == "length"
    assert _texts(response) == ["You said: tell me"]  # half of eight words


@pytest.mark.parametrize("provider", ["openai", "openai-compatible", "anthropic"])
async def test_refuse_ends_with_refusal(stack: Stack, provider: str) -> None:
    """``[[refuse]]``: the refusal text is the only part and the finish says so;
    Anthropic's refusal, as recorded, has no content: its words are in ``stopDetails``."""
    response = await respond(stack, provider, "[[refuse]] do something bad")
    if provider == "anthropic":
        assert response.finish_reason == "refusal" and response.parts == ()
        assert response.metadata["stopDetails"]["explanation"] == REFUSAL
        return
    assert response.finish_reason == "refusal" and _texts(response) == [REFUSAL]


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_parallel_calls(stack: Stack, provider: str) -> None:
    """``[[call:weather*3]]``: three calls with distinct ids in one response."""
    response = await respond(stack, provider, "[[call:weather*3]] three")
    calls = [p for p in response.parts if isinstance(p, ToolCallPart)]
    assert response.finish_reason == "tool_calls" and len({c.call_id for c in calls}) == 3


@pytest.mark.parametrize(("provider", "kinds"), [
    ("openai", ["web_search_call"]),
    ("gemini", ["google_search_call", "google_search_result"]),
    ("anthropic", ["server_tool_use", "web_search_tool_result"]),
])
async def test_search_gives_opaque_parts_before_the_text(
    stack: Stack, provider: str, kinds: list[str],
) -> None:
    """``[[search:Q]]``: the provider's server-tool shapes, kept opaque, then the answer."""
    response = await respond(stack, provider, "[[search:lyon_weather]] weather?")
    opaque = [p for p in response.parts if isinstance(p, OpaquePart)]
    assert [p.kind for p in opaque] == kinds and "lyon weather" in opaque[0].raw
    assert isinstance(response.parts[-1], TextPart) and response.finish_reason == "stop"
