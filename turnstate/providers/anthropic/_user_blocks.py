"""Anthropic user messages as content blocks (text, or text, image and document blocks)."""

from __future__ import annotations

from collections.abc import Sequence

from turnstate.core._content import for_model
from turnstate.core._conversation import Part, TextPart
from turnstate.core._registry import ModelInfo
from turnstate.providers._media import anthropic_blocks, plain_text
from turnstate.providers.chat_completions._codec import dumps_compact, quote

BLANK_USER_TEXT = "[empty message]"
"""The text sent for a stored user message of nothing but whitespace (the engine refuses
such a turn, but a chat may hold one from before, or from another provider)."""


def user_text_block(text: str) -> str:
    """A user message's text as its block; text of whitespace only (or none) as
    ``BLANK_USER_TEXT``: the API refuses an empty text block and a message whose text
    blocks are all whitespace, and leaving the message out would leave the assistant
    message after it without its question."""
    if not text or text.isspace():
        text = BLANK_USER_TEXT
    return f'{{"type":"text","text":{quote(text)}}}'


def user_json(parts: Sequence[Part], model: ModelInfo) -> str:
    """A user message's blocks (comma-joined JSON): one text block for text, else text,
    image and document blocks as ``model`` takes them (``providers._media``); text of
    whitespace only beside an image or a file is left out (the API refuses a message
    whose text blocks are all whitespace)."""
    parts = for_model(parts, model)
    text = plain_text(parts)
    if text is not None:
        return user_text_block(text)
    blocks = anthropic_blocks(parts)
    if "".join(p.text for p in parts if type(p) is TextPart).isspace():
        blocks = [block for block in blocks if block["type"] != "text"]
    return ",".join(map(dumps_compact, blocks))


