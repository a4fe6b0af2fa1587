"""A question of nothing but whitespace is refused before the turn begins.

``TurnInput(user_text="")``, ``"   "`` or ``content`` of blank text parts only asked the
provider a blank question. Anthropic refuses it ("messages: text content blocks must
contain non-whitespace text", or "... must be non-empty"), so the turn aborted
``provider_failed`` after its begin; OpenAI, Gemini and DeepSeek take it, and the stored
message then failed every later Anthropic turn of the chat (the history is replayed in
full). The engine now refuses it with ``InvalidInput`` naming the field, before the lease
and any request (the server refuses a blank ``text`` alike); an image or a file beside
blank text is still a question. A chat stored before the check goes on on Anthropic.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.engine.support import collect, make_turn
from turnstate.core import InvalidInput, TextPart
from turnstate.core._events import TurnCompleted
from turnstate.core._media import ImagePart
from turnstate.emulators import EmulatedProviders, Reply
from turnstate.engine import TurnEngine, TurnInput, _limits
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.storage import MemoryStore

SONNET = {"provider": "anthropic", "model": "claude-sonnet-4-5"}
IMAGE = ImagePart(url="https://example.com/a.png")


@pytest.fixture
async def rig() -> AsyncIterator[tuple[EmulatedProviders, TurnEngine, MemoryStore, str]]:
    async with EmulatedProviders(("anthropic", "openai")) as stack, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport:
        store = MemoryStore()
        chat = await store.create_chat(owner="o")
        yield stack, TurnEngine(store, stack.adapters, transport), store, chat.id


def blank(provider: str, model: str, **message: object) -> TurnInput:
    return TurnInput(provider=provider, model=model, system_prompt="Be terse.",
                     **message)  # type: ignore[arg-type]


@pytest.mark.parametrize("target", [SONNET, {"provider": "openai", "model": "gpt-4o"}])
@pytest.mark.parametrize(("message", "field"), [
    ({"user_text": ""}, "user_text"),
    ({"user_text": "   "}, "user_text"),
    ({"user_text": "\n\t"}, "user_text"),
    ({"content": (TextPart(text=" "),)}, "content"),
    ({"content": (TextPart(text=""), TextPart(text="\n"))}, "content"),
])
async def test_a_blank_question_is_refused_before_the_lease_and_any_request(
        rig: tuple[EmulatedProviders, TurnEngine, MemoryStore, str],
        target: dict[str, str], message: dict[str, object], field: str) -> None:
    stack, engine, store, chat_id = rig
    with pytest.raises(InvalidInput) as refused:
        await anext(engine.run_turn(chat_id, blank(**target, **message)))
    assert refused.value.field == field and "whitespace" in refused.value.problem
    assert (await store.load_chat(chat_id)).active_turn_id is None
    assert await store.list_turns(chat_id) == ()
    assert all(not emulator.requests for emulator in stack.emulators.values())


async def test_blank_text_beside_an_image_is_a_question_anthropic_takes(
        rig: tuple[EmulatedProviders, TurnEngine, MemoryStore, str]) -> None:
    stack, engine, _, chat_id = rig
    stack.emulators["anthropic"].model.push(Reply(text="A cat."))
    outcome = await collect(engine.run_turn(chat_id, blank(
        **SONNET, content=(TextPart(text=" "), IMAGE, TextPart(text="\n")))))
    assert isinstance(outcome.final, TurnCompleted), outcome.final
    assert outcome.final.text == "A cat."


async def test_a_chat_stored_with_a_blank_question_goes_on_on_anthropic(
        rig: tuple[EmulatedProviders, TurnEngine, MemoryStore, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A blank question committed on OpenAI before the check (the check is switched off
    for that turn) is replayed to Anthropic as a valid message."""
    stack, engine, store, chat_id = rig
    with monkeypatch.context() as before_the_check:
        before_the_check.setattr(_limits, "_blank_problem", lambda _: None)
        for message in ({"user_text": " "}, {"content": (TextPart(text="\n"),)}):
            stack.emulators["openai"].model.push(Reply(text="Yes?"))
            first = await collect(engine.run_turn(chat_id, blank("openai", "gpt-4o",
                                                                 **message)))
            assert isinstance(first.final, TurnCompleted), first.final
    stack.emulators["anthropic"].model.push(Reply(text="Hello."))
    outcome = await collect(engine.run_turn(chat_id, make_turn("hi", **SONNET)))
    assert isinstance(outcome.final, TurnCompleted), outcome.final
    assert len(await store.list_messages(chat_id)) == 6
