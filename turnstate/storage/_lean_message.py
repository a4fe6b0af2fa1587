"""A message read without its media bytes (``storage._lean``): its class and its parts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import attrs

from turnstate.core._conversation import (
    MessageStatus,
    OpaquePart,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    TransitionPart,
    Usage,
)
from turnstate.core._media import MediaRef

LeanPart = (TextPart | ReasoningPart | ToolCallPart | ToolResultPart | TransitionPart
            | OpaquePart | MediaRef)
"""A part of a lean read: every ``Part`` but the media parts, which are ``MediaRef``."""


def _tuple(value: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class LeanMessage:
    """A stored message without its media bytes (the fields of ``Message``)."""

    id: str
    chat_id: str
    seq: int
    role: Role
    status: MessageStatus
    parts: tuple[LeanPart, ...] = attrs.field(converter=_tuple)
    created_at: datetime
    updated_at: datetime
    provider_state: str | None = None
    usage: Usage | None = None

    def text(self) -> str:
        """The message's visible text parts, concatenated (``Message.text``)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))
