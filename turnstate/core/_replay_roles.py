"""Replayed history's turns laid out as every provider takes them: user first, roles
alternating, no message without text.

An embedder's ``delete_message``, ``edit_message`` and ``replace_from`` can leave a
stored history no provider's documented rules take, and every later replay of the chat
then fails the same way (docs/decisions.md, replay7):

* the first message deleted: the history starts with an answer (Anthropic: 400 "messages:
  first message must use the \"user\" role"; Gemini: a history must start with a user
  turn);
* a message deleted in the middle, or ``replace_from`` pointing at an answer: two
  questions (or two answers) in a row, the last question followed by the turn's own
  (Gemini requires the turns to alternate; DeepSeek's reasoner refuses successive
  messages of one role; Anthropic merges them);
* a message edited to empty text or whitespace only (Anthropic: 400 "text content blocks
  must be non-empty" / "must contain non-whitespace text"), or a question edited to parts
  no user message renders (a tool call or result, reasoning: sent with no content).

``alternating_history`` keeps every message and marks each gap with a short placeholder
of the missing role (``MISSING_QUESTION`` before an answer that has no question,
``MISSING_ANSWER`` after a question that has no answer) and each blank message with
``BLANK_QUESTION`` / ``BLANK_ANSWER``: one layout every provider takes, the same bytes
on every request of the chat (its prompt cache holds), and the model told plainly that
something was removed rather than handed a question merged into another. The store
keeps the messages as edited; only the request changes; the audit counts it.
"""

from __future__ import annotations

from itertools import cycle

import attrs

from turnstate.core._conversation import Message, Part, Role, TextPart
from turnstate.core._media import FilePart, ImagePart

MISSING_QUESTION = "[message deleted]"
"""The user turn put before an answer whose question is no longer in the history."""
MISSING_ANSWER = "[no answer]"
"""The assistant turn put after a question that has no answer in the history."""
BLANK_QUESTION = "[empty message]"
"""The text sent for a stored question of no text (or whitespace only) and nothing else."""
BLANK_ANSWER = "[empty answer]"
"""The text sent for a stored answer of no text (or whitespace only) and nothing else."""

_USER = Role.USER
_ASSISTANT = Role.ASSISTANT
_USER_CONTENT = (ImagePart, FilePart)


def _blank(parts: tuple[Part, ...], role: Role) -> bool:
    """No part, or text parts only and all of them empty or whitespace; for a question,
    no part a user message renders (text other than whitespace, an image, a file): every
    provider's user renderer writes those alone, so a question edited to a tool call or
    result, or to reasoning, was sent with no content (Anthropic's 400; embed7)."""
    if role is _USER or role == "user":
        return not any(isinstance(part, _USER_CONTENT) if type(part) is not TextPart
                       else part.text and not part.text.isspace() for part in parts)
    for part in parts:
        if type(part) is not TextPart or (part.text and not part.text.isspace()):
            return False
    return True


def _laid_out(history: tuple[Message, ...]) -> bool:
    """``history`` needs nothing: it starts with a question, alternates, ends with an
    answer and has no blank message (the hot path of a replay: an identity check of the
    role and a look at a one-text message's first character, ~0.07 us a message)."""
    if len(history) % 2:
        return False
    for message, role in zip(history, cycle((_USER, _ASSISTANT))):
        if message.role is not role:
            return False
        parts = message.parts
        if len(parts) == 1 and type(parts[0]) is TextPart:
            text = parts[0].text
            if not text or text.isspace():
                return False
        elif _blank(parts, role):
            return False
    return True


def _placeholder(beside: Message, role: Role, text: str, tag: str) -> Message:
    """A placeholder turn next to ``beside`` (its id ``beside``'s and ``tag``, which says
    on which side: each distinct; its seq ``beside``'s: the codecs read positions)."""
    return attrs.evolve(beside, id=f"{beside.id}:{tag}", role=role,
                        parts=(TextPart(text=text),), provider_state=None, usage=None)


def alternating_history(history: tuple[Message, ...]) -> tuple[tuple[Message, ...], int, int]:
    """``history`` laid out user first, roles alternating and ending with an answer (the
    turn's own question follows it), each blank message sent as its placeholder text:
    ``(history, gaps marked, blank messages)``; ``history`` itself when it needs none."""
    if _laid_out(history):
        return history, 0, 0
    out: list[Message] = []
    gaps = blanks = 0
    expected = _USER
    for stored in history:
        role = stored.role
        message = stored
        if _blank(stored.parts, role):
            blanks += 1
            text = BLANK_QUESTION if role == _USER else BLANK_ANSWER
            message = attrs.evolve(stored, parts=(TextPart(text=text),))
        if role != expected:  # a gap: the other role's placeholder first
            gaps += 1
            out.append(_placeholder(message, expected, MISSING_QUESTION if expected is _USER
                                    else MISSING_ANSWER, "before"))
        out.append(message)
        expected = _ASSISTANT if role == _USER else _USER
    if expected is not _USER:  # the last question has no answer: the turn's own follows
        gaps += 1
        out.append(_placeholder(out[-1], _ASSISTANT, MISSING_ANSWER, "after"))
    return tuple(out), gaps, blanks
