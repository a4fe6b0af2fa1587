"""A question edited to hold only parts no user message renders (a tool call or result, a
reasoning part, whitespace) replays as ``[empty message]`` (embed7).

``alternating_history`` took a message as blank only when every part was an empty text,
so a question edited to ``[ToolResultPart(...)]`` (an embedder moving a tool's output
into the question) was sent with no content at all: every user renderer writes text,
images and files only, so Anthropic got ``{"role": "user", "content": []}`` and refused
it (400 ``invalid_request_error``), and every later turn of the chat on Anthropic failed
the same way."""

from __future__ import annotations

import pytest

from tests.embedder.test_replay7_history_layout import MODELS, chat_of, laid_out, next_turn
from turnstate import ReasoningPart, TextPart, ToolCallPart, ToolResultPart, TurnEngine
from turnstate.core._conversation import Part
from turnstate.core._replay_roles import BLANK_QUESTION
from turnstate.emulators import EmulatedProviders
from turnstate.testing import emulated_engine, emulated_providers

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest

EDITS: dict[str, tuple[Part, ...]] = {
    "result": (ToolResultPart(call_id="c1", name="clock", output="noon"),),
    "call": (ToolCallPart(call_id="c1", name="clock", arguments="{}"),),
    "pair-and-blank-text": (TextPart(text="  "),
                            ToolCallPart(call_id="c1", name="clock", arguments="{}"),
                            ToolResultPart(call_id="c1", name="clock", output="noon")),
    "reasoning": (ReasoningPart(text="hmm", provider="anthropic", model="claude-sonnet-4-5",
                                kind="thinking"),),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_a_question_of_no_user_content_replays_as_a_placeholder(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders,
        provider: str, edit: str) -> None:
    chat_id = await chat_of(emulated_engine, 2)
    await emulated_engine.store.edit_message(chat_id, 3, EDITS[edit])
    sent, audit = await next_turn(emulated_engine, emulated_providers, chat_id, provider)
    assert laid_out(sent), sent
    assert sent[2] == ("user", BLANK_QUESTION), sent
    assert audit["blankMessages"] == 1
