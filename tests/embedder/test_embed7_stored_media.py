"""A stored question whose image no wire can take replays as its omitted text, and one
given by a ``data:`` URL as its inline bytes (embed7).

``TurnInput`` refuses an image or PDF by a non-https or private URL, and bytes that are
not what their type says, and turns a ``data:`` URL into inline bytes; ``edit_message``
stored any part (it refuses them since rough9), so a question an embedder edited (or a
message a custom store or an older turnstate wrote) could hold
``ImagePart(url="http://10.0.0.1/x.png")``, a ``data:`` URL or a PNG that is a JPEG,
and ``for_model`` sent it as it was: Anthropic takes no ``data:`` URL in a ``url``
source and fetches no private address, so every later replay of the chat failed with a
400; the other wires sent the fetcher to the private address."""

from __future__ import annotations

import base64

import pytest

from tests.embedder.test_replay7_history_layout import MODELS, chat_of
from turnstate import FilePart, ImagePart, TextPart, TurnEngine, TurnInput
from turnstate.core._conversation import Part
from turnstate.core._errors import InvalidInput
from turnstate.emulators import EmulatedProviders
from turnstate.storage import TurnStart
from turnstate.testing import emulated_engine, emulated_providers, turn_events
from turnstate.testing._records import commit

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest

PNG = b"\x89PNG\r\n\x1a\n" + bytes(48)
JPEG = b"\xff\xd8\xff\xe0" + bytes(48)
VISION = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4-5", "gemini": "gemini-2.5-flash",
          "openai-compatible": "gpt-4o"}
EDITS: dict[str, tuple[Part, ...]] = {
    "private-url": (TextPart(text="see"), ImagePart(url="http://10.0.0.1/x.png")),
    "loopback-pdf": (TextPart(text="see"), FilePart(url="https://127.0.0.1/a.pdf")),
    "mistyped-bytes": (TextPart(text="see"), ImagePart(media_type="image/png", data=JPEG)),
}


async def planted_chat(engine: TurnEngine, question: tuple[Part, ...]) -> str:
    """A chat whose one question is ``question``, written as a turn's begin takes it
    (unchecked: a store holds what it is given)."""
    chat = await engine.store.create_chat(owner="o")
    lease = await engine.store.begin_turn(chat.id, TurnStart(
        turn_id="planted", user_parts=question, provider="anthropic",
        model="claude-sonnet-4-5", lease_seconds=60))
    await engine.store.commit_turn(lease, commit(None, parts=(TextPart(text="seen"),)))
    return chat.id


@pytest.mark.parametrize("edit", sorted(EDITS))
@pytest.mark.parametrize("provider", sorted(VISION))
async def test_a_stored_part_no_wire_takes_is_sent_as_its_omitted_text(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders,
        provider: str, edit: str) -> None:
    chat_id = await chat_of(emulated_engine, 1)
    with pytest.raises(InvalidInput):  # refused as an edit since rough9: planted instead
        await emulated_engine.store.edit_message(chat_id, 1, EDITS[edit])
    chat_id = await planted_chat(emulated_engine, EDITS[edit])
    turn = TurnInput(provider=provider, model=VISION[provider], system_prompt="s",
                     user_text="next")
    events = await turn_events(emulated_engine.run_turn(chat_id, turn))
    assert events[-1].type == "turn_completed", events[-1]
    body = emulated_providers.emulators[provider].requests[-1].body
    assert b"omitted:" in body
    assert b"10.0.0.1" not in body.replace(b"omitted: http://10.0.0.1", b"")
    assert base64.b64encode(JPEG) not in body


@pytest.mark.parametrize("provider", sorted(VISION))
async def test_a_stored_data_url_is_sent_as_its_bytes(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders,
        provider: str) -> None:
    chat_id = await chat_of(emulated_engine, 1)
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    await emulated_engine.store.edit_message(chat_id, 1, (TextPart(text="see"),
                                                          ImagePart(url=url)))
    turn = TurnInput(provider=provider, model=VISION[provider], system_prompt="s",
                     user_text="next")
    events = await turn_events(emulated_engine.run_turn(chat_id, turn))
    assert events[-1].type == "turn_completed", events[-1]
    body = emulated_providers.emulators[provider].requests[-1].body
    assert base64.b64encode(PNG) in body and b"omitted" not in body
    if provider == "anthropic":  # its inline source, not a url source of a data: URL
        assert b'"type":"base64"' in body and b'"url":"data:' not in body


def test_models_is_every_provider() -> None:
    assert set(VISION) | {"deepseek"} == set(MODELS)
