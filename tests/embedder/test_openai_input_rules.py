"""OpenAI's documented input rules, held by turnstate before the lease (wire9): JSON mode
needs the word "json" in the turn's message (Chat Completions and DeepSeek: or its system
prompt; Responses sends the system prompt as ``instructions``, which do not count), and images
are held to 500 a request and 20 MiB each, on both OpenAI wires."""

from __future__ import annotations

import pytest

from tests.core.test_replay7_limits import asked, image
from turnstate import (
    DEFAULT_REGISTRY,
    GenerationSettings,
    InvalidInput,
    ResponseFormat,
    TextPart,
    TurnCompleted,
    TurnEngine,
    TurnInput,
)
from turnstate.core._capabilities import MEDIA_LIMITS
from turnstate.core._content import capability_problem
from turnstate.core._media import ImagePart
from turnstate.core._media_fit import fit_history_media
from turnstate.emulators import EmulatedProviders
from turnstate.emulators._openai_limits import MAX_IMAGE_CHARS
from turnstate.testing import emulated_engine, emulated_providers, turn_events

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest

MODELS = {"openai": "gpt-4o", "openai-compatible": "gpt-4o", "deepseek": "deepseek-chat"}
JSON_MODE = GenerationSettings(response_format=ResponseFormat())


def turn(provider: str, prompt: str, text: str) -> TurnInput:
    return TurnInput(provider=provider, model=MODELS[provider], system_prompt=prompt,
                     user_text=text, settings=JSON_MODE)


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_json_mode_without_the_word_is_refused_before_the_lease(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders,
        provider: str) -> None:
    chat = await emulated_engine.store.create_chat(owner="o")
    with pytest.raises(InvalidInput) as caught:
        await turn_events(emulated_engine.run_turn(chat.id, turn(provider, "Be terse.", "hi")))
    assert caught.value.field == "settings.response_format"
    assert "json" in str(caught.value)
    assert emulated_providers.emulators[provider].requests == []
    events = await turn_events(emulated_engine.run_turn(
        chat.id, turn(provider, "Be terse.", "Give me a JSON object")))
    assert isinstance(events[-1], TurnCompleted), events[-1]


async def test_the_system_prompt_counts_on_chat_completions_not_on_responses(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders) -> None:
    for provider in ("openai-compatible", "deepseek"):
        chat = await emulated_engine.store.create_chat(owner="o")
        events = await turn_events(emulated_engine.run_turn(
            chat.id, turn(provider, "Answer in JSON.", "hi")))
        assert isinstance(events[-1], TurnCompleted), events[-1]
    other = await emulated_engine.store.create_chat(owner="o")
    with pytest.raises(InvalidInput):  # the API would answer 400: instructions do not count
        await turn_events(emulated_engine.run_turn(other.id, turn("openai", "Answer in JSON.",
                                                                  "hi")))
    assert emulated_providers.emulators["openai"].requests == []


@pytest.mark.parametrize("provider", ["openai", "openai-compatible"])
def test_openai_image_count_and_size_limits(provider: str) -> None:
    """An image is measured on its base64, as the emulators measure it: 20 MiB fit,
    20 MiB + 2 bytes (the next base64 length) do not."""
    model = DEFAULT_REGISTRY.model(provider, MODELS[provider])
    url = ImagePart(url="https://example.test/a.png")
    assert capability_problem([url] * 500, model) is None
    problem = capability_problem([url] * 501, model)
    assert problem is not None and "up to 500 images" in problem[1]
    mib = 1024 * 1024
    big = ImagePart(media_type="image/png", data=b"\0" * (20 * mib + 2))  # past its base64
    problem = capability_problem([big], model)
    assert problem is not None and problem[0] == "content[0].data"
    assert capability_problem([ImagePart(media_type="image/png", data=b"\0" * (20 * mib))],
                              model) is None
    assert MEDIA_LIMITS[provider]["image"] == MAX_IMAGE_CHARS  # what the emulators refuse


@pytest.mark.parametrize("provider", ["openai", "openai-compatible"])
def test_a_replay_to_openai_sends_at_most_500_images_the_newest(provider: str) -> None:
    model = DEFAULT_REGISTRY.model(provider, MODELS[provider])
    history = tuple(asked(seq, image(2 * seq), image(2 * seq + 1)) for seq in range(260))
    own = (TextPart(text="and these"), image(10_000), image(10_001))
    fitted, omitted = fit_history_media(history, own, model)
    kept = [p for m in fitted for p in m.parts if isinstance(p, ImagePart)]
    assert omitted == 22 and len(kept) == 498  # 498 of the history's and the turn's 2
    assert kept[0].url == "https://example.com/22.png"
