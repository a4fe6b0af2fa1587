"""The words of a refused media part (``_media.part_problem``): its first bytes as a
reader can see them, and what to send instead when the part is the wrong kind for its
content (text as a ``TextPart``, an image as an ``ImagePart``, a PDF as a ``FilePart``)."""

from __future__ import annotations

SHOWN_BYTES = 8
"""How many of a refused part's first bytes its problem shows."""

PDF = "application/pdf"


def first_bytes(data: bytes) -> str:
    """``data``'s first bytes in hex (``6e 6f 74``), followed by them as text in double
    quotes when they are printable ASCII (``"not"``): never a Python bytes literal."""
    head = data[:SHOWN_BYTES]
    shown = head.hex(" ")
    if head.isascii() and head.decode("ascii").isprintable():
        shown += f' ("{head.decode("ascii")}")'
    return shown


def looks_like_text(data: bytes) -> bool:
    """Whether ``data`` reads as UTF-8 text (its first KiB, a cut character allowed)."""
    head = data[:1024]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not merely a character cut at the end
            return False
        text = head[:exc.start].decode("utf-8")
    return all(c.isprintable() or c in "\t\r\n" for c in text)


def text_hint(data: bytes) -> str:
    """What to do with inline bytes that are text rather than media: a URL given as the
    part's ``url``, other text as a ``TextPart``; ``""`` for bytes that are not text."""
    if not looks_like_text(data):
        return ""
    if data[:8].lower().startswith((b"https://", b"http://")):
        return ": these bytes are a URL, give it as the part's url"
    return ": send text as a TextPart"


def wrong_part_hint(kind: str, media_type: str) -> str:
    """What to send instead of a ``kind`` (``image`` or ``file``) part declared as
    ``media_type``, which that part does not take: ``""`` when no other part would."""
    if media_type.startswith("text/") or media_type in {"application/json"}:
        return ": send text as a TextPart"
    if kind == "file" and media_type.startswith("image/"):
        return ": send an image as an ImagePart"
    if kind == "image" and media_type == PDF:
        return ": send a PDF as a FilePart"
    return ""


def missing_type_hint(detected: str | None) -> str:
    """What to say to a part whose inline bytes came without a media type: the type its
    bytes are, when they are one of the known ones."""
    return "" if detected is None else (
        f" (the bytes are an {detected}: give media_type={detected!r})")
