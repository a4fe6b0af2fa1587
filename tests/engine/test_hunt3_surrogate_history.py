"""A chat stored with lone surrogates (by a turnstate before the mending at a response's
end) can still be sent back to every provider.

Such text stays in users' databases: a reply holding ``"\\ud800"`` or half an emoji.
Every later request that replays the chat (Chat Completions, DeepSeek, Anthropic, and
OpenAI Responses or Gemini without a cursor) failed to encode its body
("could not build the request: UnicodeEncodeError"). A body UTF-8 cannot encode now
has each lone surrogate replaced by U+FFFD (``core._text.mended``) where it is encoded.
"""

from __future__ import annotations

import pytest

from tests.engine.support import collect, make_turn
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore
from turnstate.testing._records import committed_turn

MODELS = {"openai": "gpt-4o", "gemini": "gemini-2.5-flash", "anthropic": "claude-sonnet-4-5",
          "openai-compatible": "gpt-4o-mini", "deepseek": "deepseek-chat"}


@pytest.mark.parametrize("provider", sorted(MODELS))
@pytest.mark.parametrize(("stored", "sent"), [
    ("half \ud83d emoji", "half \ufffd emoji"),
    ("lone \udfff low", "lone \ufffd low"),
])
async def test_a_stored_reply_with_a_lone_surrogate_is_replayed_mended(
        provider: str, stored: str, sent: str) -> None:
    store = MemoryStore()
    chat = await store.create_chat(owner="alice")
    # Stored as an older turnstate stored it: straight through the store, no mending.
    await committed_turn(store, chat.id, "t-old", reply=stored)
    history = await store.load_history(chat.id)
    assert history[-1].parts[0].text == stored  # type: ignore[union-attr]
    async with EmulatedProviders() as stack, AiohttpTransport() as transport:
        engine = TurnEngine(store, stack.adapters, transport)
        turn = make_turn("[[say:fine]] and now?", provider=provider, model=MODELS[provider],
                         tools=())
        outcome = await collect(engine.run_turn(chat.id, turn))
        assert outcome.final.type == "turn_completed", outcome.final
        body = stack.emulators[provider].requests[-1].body.decode("utf-8")
    assert sent in body  # the history was sent, mended
    history = await store.load_history(chat.id)
    assert history[1].parts[0].text == stored  # type: ignore[union-attr]  # not rewritten
