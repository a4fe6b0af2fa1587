"""A chat an embedder's deletes and edits left out of shape replays as every provider
takes it (replay7).

``delete_message``, ``edit_message`` and ``replace_from`` can leave a history that starts
with an answer (the first question deleted: Anthropic's 400 "messages: first message must
use the \"user\" role"; Gemini wants a user turn first), two questions or two answers in a
row (Gemini wants the turns to alternate, DeepSeek's reasoner refuses successive messages
of one role) or a message of empty text (Anthropic's 400 "text content blocks must be
non-empty"). Every later replay of the chat sent that shape again. Now the replay marks
each gap with a placeholder of the missing role and each blank message with a placeholder
text; the store keeps the messages as edited and the audit counts what was adapted
(``replayGaps``, ``blankMessages``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from turnstate import TextPart, TurnEngine, TurnInput
from turnstate.core._replay_roles import (
    BLANK_ANSWER,
    BLANK_QUESTION,
    MISSING_ANSWER,
    MISSING_QUESTION,
)
from turnstate.emulators import EmulatedProviders
from turnstate.testing import emulated_engine, emulated_providers, turn_events

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest

MODELS = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4-5", "gemini": "gemini-2.5-flash",
          "openai-compatible": "gpt-4o", "deepseek": "deepseek-chat"}


def turns(provider: str, body: bytes) -> list[tuple[str, str]]:
    """The request's conversation as ``(role, text)``, in order (the system prompt left
    out), from each wire's own layout."""
    sent: dict[str, Any] = json.loads(body)
    if provider == "gemini":
        return [("user" if step["type"] == "user_input" else "assistant",
                 "".join(c.get("text", "") for c in step["content"]))
                for step in sent["input"]]
    items = sent["input"] if provider == "openai" else sent["messages"]
    out = []
    for item in items:
        if item["role"] == "system":
            continue
        content = item["content"]
        text = content if isinstance(content, str) else "".join(
            block.get("text", "") for block in content)
        out.append((item["role"], text))
    return out


def laid_out(sent: list[tuple[str, str]]) -> bool:
    """User first, roles alternating, no text empty or whitespace only."""
    return all(role == ("user" if at % 2 == 0 else "assistant") and text.strip()
               for at, (role, text) in enumerate(sent))


async def chat_of(engine: TurnEngine, questions: int) -> str:
    chat = await engine.store.create_chat(owner="o")
    for n in range(questions):
        turn = TurnInput(provider="anthropic", model="claude-sonnet-4-5", system_prompt="s",
                         user_text=f"question {n}")
        assert (await turn_events(engine.run_turn(chat.id, turn)))[-1].type == "turn_completed"
    return chat.id


async def next_turn(engine: TurnEngine, providers: EmulatedProviders, chat_id: str,
                    provider: str, **given: Any) -> tuple[list[tuple[str, str]], Any]:
    turn = TurnInput(provider=provider, model=MODELS[provider], system_prompt="s",
                     user_text="next", **given)
    events = await turn_events(engine.run_turn(chat_id, turn))
    assert events[-1].type == "turn_completed", events[-1]
    answer = (await engine.store.list_messages(chat_id))[-1]
    audit = json.loads(answer.provider_state or "{}")["metadata"]
    return turns(provider, providers.emulators[provider].requests[-1].body), audit


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_a_chat_whose_first_question_was_deleted_replays_a_question_first(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders,
        provider: str) -> None:
    chat_id = await chat_of(emulated_engine, 2)
    await emulated_engine.store.delete_message(chat_id, 1)
    sent, audit = await next_turn(emulated_engine, emulated_providers, chat_id, provider)
    assert sent[0] == ("user", MISSING_QUESTION), sent
    assert laid_out(sent) and sent[-1] == ("user", "next")
    assert audit["replayGaps"] == 1
    stored = await emulated_engine.store.list_messages(chat_id)
    assert stored[0].role == "assistant"  # the store keeps the chat as it was left


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_deletes_in_the_middle_and_a_replace_from_an_answer_replay_alternating(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders,
        provider: str) -> None:
    chat_id = await chat_of(emulated_engine, 4)
    store = emulated_engine.store
    await store.delete_message(chat_id, 2)  # an answer: two questions in a row
    await store.delete_message(chat_id, 5)  # a question: two answers in a row
    # the last answer replaced: the turn's question follows the last stored one
    sent, audit = await next_turn(emulated_engine, emulated_providers, chat_id, provider,
                                  replace_from=8)
    assert laid_out(sent), sent
    assert [text for _, text in sent] == [
        "question 0", MISSING_ANSWER, "question 1", "You said: question 1",
        MISSING_QUESTION, "You said: question 2", "question 3", MISSING_ANSWER, "next"]
    assert audit["replayGaps"] == 3


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_messages_edited_to_blank_text_replay_as_placeholders(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders,
        provider: str) -> None:
    chat_id = await chat_of(emulated_engine, 2)
    store = emulated_engine.store
    await store.edit_message(chat_id, 1, (TextPart(text=" \n "),))
    await store.edit_message(chat_id, 2, (TextPart(text=""),))
    sent, audit = await next_turn(emulated_engine, emulated_providers, chat_id, provider)
    assert laid_out(sent), sent
    assert sent[:2] == [("user", BLANK_QUESTION), ("assistant", BLANK_ANSWER)]
    assert audit["blankMessages"] == 2
    assert (await store.list_messages(chat_id))[1].parts == (TextPart(text=""),)
