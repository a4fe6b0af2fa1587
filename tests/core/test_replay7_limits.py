"""Numbers a provider documents that a turn could pass unchecked (replay7): Gemini's
``seed`` is an ``int32``, every other provider's a 64-bit integer; Anthropic takes 100
images a request, the turn's and its replayed history's together."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from turnstate import DEFAULT_REGISTRY, GenerationSettings, ImagePart, InvalidInput, TextPart
from turnstate.core._content import capability_problem
from turnstate.core._conversation import Message, MessageStatus, Role
from turnstate.core._generation import check_settings
from turnstate.core._media_fit import fit_history_media

NOW = datetime(2026, 12, 5, tzinfo=UTC)
CLAUDE = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")


@pytest.mark.parametrize(("provider", "model", "seed", "ok"), [
    ("gemini", "gemini-2.5-flash", 2**31 - 1, True),
    ("gemini", "gemini-2.5-flash", -(2**31), True),
    ("gemini", "gemini-2.5-flash", 2**31, False),
    ("gemini", "gemini-2.5-flash", -(2**31) - 1, False),
    ("openai-compatible", "gpt-4o", 2**31, True),
    ("openai-compatible", "gpt-4o", 2**63, False),
])
def test_a_seed_is_held_to_the_providers_integer(provider: str, model: str, seed: int,
                                                 ok: bool) -> None:
    settings = GenerationSettings(seed=seed)
    check = (DEFAULT_REGISTRY.provider(provider), DEFAULT_REGISTRY.model(provider, model))
    if ok:
        check_settings(settings, *check, ())
        return
    with pytest.raises(InvalidInput) as caught:
        check_settings(settings, *check, ())
    assert caught.value.field == "settings.seed"


def image(n: int) -> ImagePart:
    return ImagePart(media_type="image/png", url=f"https://example.com/{n}.png")


def asked(seq: int, *parts: ImagePart | TextPart) -> Message:
    return Message(id=f"m{seq}", chat_id="c", seq=seq, role=Role.USER,
                   status=MessageStatus.COMPLETED, parts=(TextPart(text="look"), *parts),
                   created_at=NOW, updated_at=NOW)


def test_a_replay_to_anthropic_sends_at_most_100_images_the_newest() -> None:
    history = tuple(asked(seq, image(2 * seq), image(2 * seq + 1)) for seq in range(60))
    own = (TextPart(text="and these"), image(1000), image(1001))
    fitted, omitted = fit_history_media(history, own, CLAUDE)
    kept = [p for m in fitted for p in m.parts if isinstance(p, ImagePart)]
    assert omitted == 22 and len(kept) == 98  # 98 of the history's and the turn's 2
    assert kept[0].url == "https://example.com/22.png"  # the oldest 22 left out
    assert fitted[10].parts[1].text.startswith("\n[image omitted")  # type: ignore[union-attr]
    assert fit_history_media(history[:49], own, CLAUDE) == (history[:49], 0)  # 98 + 2


def test_a_turn_of_more_than_100_images_is_refused_before_the_lease() -> None:
    content = (TextPart(text="all"), *(image(n) for n in range(101)))
    assert capability_problem(content[:101], CLAUDE) is None
    problem = capability_problem(content, CLAUDE)
    assert problem is not None and problem[0] == "content" and "100 images" in problem[1]
