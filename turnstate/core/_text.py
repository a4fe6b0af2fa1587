"""Text that can be encoded as UTF-8, and the policy for text that cannot.

Python strings may hold lone surrogates (``"\\ud800"``), which UTF-8 cannot encode; a
request body or a database row holding one fails far from where it came in. User text
with one is refused (``InvalidInput``); a tool's output is repaired instead, each lone
surrogate becoming U+FFFD, and the result says how many were replaced.
"""

from __future__ import annotations

import re

REPLACEMENT = "\ufffd"

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogates(text: str) -> int:
    """How many code points of ``text`` cannot be encoded as UTF-8."""
    if text.isascii():
        return 0
    return len(_LONE_SURROGATE.findall(text))


def first_lone_surrogate(text: str) -> int | None:
    """The index of the first code point UTF-8 cannot encode, or None."""
    if text.isascii():
        return None
    found = _LONE_SURROGATE.search(text)
    return found.start() if found else None


def surrogate_problem(text: str) -> str | None:
    """Why ``text`` cannot be encoded as UTF-8 (its first lone surrogate), or None: the
    problem an ``InvalidInput`` names for user text."""
    index = first_lone_surrogate(text)
    if index is None:
        return None
    return f"a lone surrogate at index {index} cannot be encoded as UTF-8"


def repaired(text: str) -> tuple[str, int]:
    """``text`` with every lone surrogate replaced by U+FFFD, and how many there were."""
    if text.isascii():
        return text, 0
    return _LONE_SURROGATE.subn(REPLACEMENT, text)


_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _joined(pair: re.Match[str]) -> str:
    return pair.group().encode("utf-16-le", "surrogatepass").decode("utf-16-le")


def mended(text: str) -> str:
    """``text`` as UTF-8 can encode it: each surrogate pair (an emoji whose halves came
    as two JSON escapes, in two deltas) joined into its character, each lone surrogate
    left replaced by U+FFFD; ``text`` itself when it has none."""
    if text.isascii() or _LONE_SURROGATE.search(text) is None:
        return text
    return _LONE_SURROGATE.sub(REPLACEMENT, _SURROGATE_PAIR.sub(_joined, text))


def utf8(text: str) -> bytes:
    """``text`` encoded as UTF-8, ``mended`` first when it cannot be (a request body
    replaying text an older turnstate stored with lone surrogates); the happy path is
    the encode alone."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return mended(text).encode("utf-8")


def fetched_host(host: str) -> str | None:
    """``host`` as a fetcher reads it: lower-case ASCII, a name of other characters
    through IDNA (``"ｌｏｃａｌｈｏｓｔ"`` is ``localhost``, ``"１２７。０。０。１"`` is
    ``127.0.0.1``: full-width forms, compatibility characters and the ideographic full
    stop fold to ASCII, as the WHATWG URL parser, ``requests`` and ``yarl`` fold them);
    None when IDNA refuses it (no fetcher could ask for it)."""
    if host.isascii():
        return host.lower()
    try:
        return host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return None
