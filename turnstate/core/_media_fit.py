"""Replayed history's inline images and files, held to the provider's request limit.

A turn's own parts are checked against ``MEDIA_LIMITS`` before the lease
(``_content.capability_problem``). A replay (a provider switch, an expired cursor, every
request of a stateless loop) also sends every earlier user message's inline images and
files again, and a chat that took one large image a turn passes the limit after a few
turns: Anthropic answers 413 ``request_too_large`` (32 MB a request), OpenAI refuses past
its 50 MB of files, and every later turn of that chat on that provider fails the same way.
``fit_history_media`` keeps the newest inline media that fit beside the turn's own and
sends each older one as its ``omitted_text``, as to a model that takes no such input
(the store keeps them whole; only the request changes). docs/decisions.md (embed6).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from turnstate.core._capabilities import MEDIA_LIMITS
from turnstate.core._content import omitted_part
from turnstate.core._conversation import Message, Part, Role, TextPart, UserPart
from turnstate.core._media import FilePart, ImagePart, kind_of
from turnstate.core._registry import ModelInfo


def _encoded(part: ImagePart | FilePart) -> int:
    """The base64 characters ``part``'s inline bytes take on the wire (0 for a URL)."""
    return 0 if part.data is None else (len(part.data) + 2) // 3 * 4


def fit_history_media(history: tuple[Message, ...], content: Sequence[UserPart],
                      model: ModelInfo, *, candidates: Sequence[int] | None = None,
                      ) -> tuple[tuple[Message, ...], int]:
    """``history`` with its oldest inline images and files sent as their
    ``omitted_text`` where all of them with the turn's own ``content`` would pass
    ``model``'s provider's request limit, and its oldest images (inline or by URL) where
    there would be more than the provider's count a request (``images``), and how many
    were left out (0: ``history`` itself). Newest first: once one does not fit, it and
    every older one of its kind is left out, so the model sees the recent ones whole.
    Media the model does not take count nothing (``for_model`` sends them as text
    anyway). ``candidates``: the indexes of the user messages holding a part other than
    text, ascending, when known (``HistoryFacts.media``): only those are looked at."""
    limits = MEDIA_LIMITS.get(model.provider, {})
    limit, count_limit = limits.get("request"), limits.get("images")
    if limit is None and count_limit is None:
        return history, 0
    inputs = model.inputs
    own = [p for p in content if isinstance(p, ImagePart | FilePart) and kind_of(p) in inputs]
    budget = (limit or 0) - sum(_encoded(p) for p in own)
    count = (count_limit or 0) - sum(1 for p in own if isinstance(p, ImagePart))
    fitted = list(history)
    omitted = 0
    full = counted = False  # the byte budget, the image count spent: every older one out
    user = Role.USER
    indexes = range(len(history) - 1, -1, -1) if candidates is None else reversed(candidates)
    for index in indexes:
        message = history[index]
        if message.role is not user:
            continue
        parts_in = message.parts
        if (len(parts_in) == 1 and type(parts_in[0]) is TextPart) \
                or all(type(p) is TextPart for p in parts_in):
            continue
        parts: list[Part] = list(parts_in)
        changed = False
        for at in range(len(parts) - 1, -1, -1):
            part = parts[at]
            if not isinstance(part, ImagePart | FilePart) or kind_of(part) not in inputs:
                continue
            image = isinstance(part, ImagePart)
            if image and count_limit is not None:
                counted = counted or count <= 0
                count -= 1
            if part.data is not None and limit is not None:
                size = _encoded(part)
                full = full or size > budget
                budget -= size
            if not ((image and counted) or (part.data is not None and full)):
                continue
            parts[at] = omitted_part(part, at, len(parts) - 1)
            omitted += 1
            changed = True
        if changed:
            fitted[index] = attrs.evolve(message, parts=tuple(parts))
    return (tuple(fitted), omitted) if omitted else (history, 0)
