"""A chat's title as ``PATCH /api/chats/{id}`` takes it: checked, then trimmed.

A title is one line of visible text: up to ``MAX_TITLE_CHARS`` characters once its ends
are trimmed, not empty, without control characters (a newline or tab, NUL, DEL, C1) or
the bidirectional overrides and isolates that reorder the text shown after them (a title
sits beside others in the list: "U+202E" would reverse what follows it on screen). Emoji
joiners and other format characters are kept. ``null`` removes the title: the chat is
named by its first message again.
"""

from __future__ import annotations

import re
from typing import Any

from turnstate.core._text import first_lone_surrogate
from turnstate.server._http import ApiError, reject
from turnstate.storage._record_checks import MAX_TITLE_CHARS

_REFUSED = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
"""Control characters (C0, DEL, C1), bidi embeddings/overrides/isolates, line and
paragraph separators."""


def title_field(body: dict[str, Any]) -> str | None:
    """The body's ``title``: trimmed text, or None to remove it (400 ``invalid_field``,
    or 413 ``text_too_long``, naming ``title``)."""
    if "title" not in body:
        reject("title", "title is required: a string, or null to name the chat by its "
                        "first message again")
    value = body["title"]
    if value is None:
        return None
    if not isinstance(value, str):
        reject("title", "title must be a string or null")
    title = value.strip()
    if not title:
        reject("title", "title must not be empty (null names the chat by its first "
                        "message again)")
    if len(title) > MAX_TITLE_CHARS:
        raise ApiError(413, "text_too_long",
                       f"title is longer than {MAX_TITLE_CHARS} characters", field="title")
    if first_lone_surrogate(title) is not None:
        reject("title", "title is not valid Unicode text")
    found = _REFUSED.search(title)
    if found is not None:
        reject("title", f"title must be one line of visible text (it holds "
                        f"U+{ord(found.group()):04X})")
    return title
