"""Images and PDFs as a front end sends them (embed4): a ``data:`` URL (what a browser's
``FileReader.readAsDataURL`` gives) is taken as the inline bytes it carries, on every
provider that takes images; what a provider's wire cannot carry is refused, typed,
before the lease. Before: a data URL was ``InvalidInput`` ("must be an https URL"), an
Anthropic image past its 10 MB base64 limit reached the provider (a 400 mid-turn), and a
PDF by URL to a Chat Completions model was silently replaced by placeholder text."""

from __future__ import annotations

import base64

import attrs
import pytest

from tests.engine.test_media import png
from turnstate import (
    DEFAULT_REGISTRY,
    FilePart,
    ImagePart,
    InvalidInput,
    TextPart,
    TurnCompleted,
    TurnEngine,
    TurnInput,
)
from turnstate.core._content import capability_problem
from turnstate.emulators import EmulatedProviders
from turnstate.testing import emulated_engine, emulated_providers, turn_events

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest

PDF = b"%PDF-1.4\n" + b"0" * 300
VISION = {"openai": "gpt-4o", "gemini": "gemini-2.5-flash", "anthropic": "claude-sonnet-4-5",
          "openai-compatible": "gpt-4o"}


def data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def test_a_data_url_becomes_inline_bytes() -> None:
    image = png()
    turn = TurnInput(provider="openai", model="gpt-4o", system_prompt="s", content=(
        TextPart(text="What is this?"), ImagePart(url=data_url("image/png", image),
                                                  filename="a.png"),
        FilePart(url=data_url("application/pdf", PDF))))
    assert turn.content[1] == ImagePart(media_type="image/png", data=image, filename="a.png")
    assert turn.content[2] == FilePart(data=PDF)
    assert turn.user_text == "What is this?"
    plain = TurnInput(provider="openai", model="gpt-4o", system_prompt="s", content=(
        ImagePart(url="data:;base64," + base64.b64encode(image).decode(),
                  media_type="image/png"),))
    assert plain.content[0] == ImagePart(media_type="image/png", data=image)


@pytest.mark.parametrize(("part", "field"), [
    (ImagePart(url="data:image/png;base64"), "content[0].url"),  # no comma
    (ImagePart(url="data:image/png;base64,***"), "content[0].url"),  # not base64
    (ImagePart(url=data_url("image/png", png()), media_type="image/jpeg"),
     "content[0].media_type"),
    (ImagePart(url=data_url("image/jpeg", png())), "content[0].media_type"),  # bytes: a PNG
    (ImagePart(url=data_url("image/bmp", b"BM" + bytes(64))), "content[0].media_type"),
    (ImagePart(url="data:," + base64.b64encode(png()).decode()), "content[0].media_type"),
    (FilePart(url=data_url("image/png", png())), "content[0].media_type"),
    (ImagePart(url="data:image/png;base64,"), "content[0].data"),  # empty
])
def test_a_bad_data_url_is_refused_naming_the_part(part: ImagePart | FilePart,
                                                   field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        TurnInput(provider="openai", model="gpt-4o", system_prompt="s", content=(part,))
    assert caught.value.field == field


@pytest.mark.parametrize("provider", sorted(VISION))
async def test_a_data_url_image_reaches_every_vision_provider(
        emulated_engine: TurnEngine, provider: str) -> None:
    chat = await emulated_engine.store.create_chat(owner="o")
    image = png()
    events = await turn_events(emulated_engine.run_turn(chat.id, TurnInput(
        provider=provider, model=VISION[provider], system_prompt="s", content=(
            TextPart(text="What is this?"), ImagePart(url=data_url("image/png", image))))))
    final = events[-1]
    assert isinstance(final, TurnCompleted), final
    assert f"an image/png of {len(image):,} bytes" in final.text


async def test_an_anthropic_image_past_its_limit_is_refused_before_the_lease(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders) -> None:
    chat = await emulated_engine.store.create_chat(owner="o")
    big = png(size=7_900_000)  # 10,533,336 base64 characters: over 10,485,760
    with pytest.raises(InvalidInput) as caught:
        await turn_events(emulated_engine.run_turn(chat.id, TurnInput(
            provider="anthropic", model="claude-sonnet-4-5", system_prompt="s",
            content=(ImagePart(media_type="image/png", data=big),))))
    assert caught.value.field == "content[0].data"
    assert "10,485,760" in caught.value.problem
    assert emulated_providers.emulators["anthropic"].requests == []
    openai = DEFAULT_REGISTRY.model("openai", "gpt-4o")  # OpenAI takes it
    assert capability_problem((ImagePart(media_type="image/png", data=big),), openai) is None
    fits = png(size=7_864_320)  # exactly 10,485,760 base64 characters
    anthropic = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")
    assert capability_problem((ImagePart(media_type="image/png", data=fits),), anthropic) is None


def test_a_turn_s_media_past_a_provider_s_request_limit_is_refused() -> None:
    image = ImagePart(media_type="image/png", data=png(size=7_000_000))
    anthropic = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")
    assert capability_problem((image,) * 3, anthropic) is None  # 28 M characters
    problem = capability_problem((image,) * 4, anthropic)  # 37.3 M: over 32 M
    assert problem is not None and problem[0] == "content"
    openai = DEFAULT_REGISTRY.model("openai", "gpt-4o")
    assert capability_problem((image,) * 5, openai) is None  # 46.7 M
    problem = capability_problem((image,) * 6, openai)  # 56 M: over 50 M
    assert problem is not None and problem[0] == "content"


def test_a_pdf_url_on_a_wire_without_file_urls_is_refused() -> None:
    model = attrs.evolve(DEFAULT_REGISTRY.model("openai-compatible", "gpt-4o"),
                         inputs=frozenset({"image", "file"}))
    by_url = FilePart(url="https://example.com/a.pdf")
    assert capability_problem((TextPart(text="x"), by_url), model) == (
        "content[1].url", "openai-compatible takes no file URL (its wire has none): send "
        "the PDF's bytes inline")
    assert capability_problem((FilePart(data=PDF),), model) is None
    anthropic = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")
    assert capability_problem((by_url,), anthropic) is None  # Anthropic fetches it
