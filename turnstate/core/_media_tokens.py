"""How many tokens an image or a PDF costs, roughly, by each provider's documented rule.

The context estimate (``turnstate.core._context``) counts text at about four characters
per token; a media part counts its tokens here instead (never its base64 length: a
1 MB screenshot is about 1,600 tokens, not 350,000). Rules as documented (read on
2026-12-03, docs/decisions.md):

* Anthropic: an image is scaled to at most 1,568 px on its long edge and about 1.15
  megapixels, then costs ``width * height / 750`` tokens (about 1,600 at most). A PDF
  page costs its text (1,500 to 3,000 tokens) plus the page as an image.
* OpenAI (Responses and Chat Completions, ``detail: auto`` read as high): the image is
  fitted in 2,048 x 2,048, its short side scaled to 768, then 170 tokens per 512 px
  tile plus 85. A PDF page is its text plus its page image.
* Gemini: an image of at most 384 px on both sides is 258 tokens; larger ones are cut in
  768 x 768 tiles of 258 tokens each. A PDF page is 258 tokens.

The size of an inline image is read from its header (PNG, GIF, JPEG, WebP); a URL image
or an unreadable header costs ``UNKNOWN_IMAGE_TOKENS`` (Anthropic: its 1,600 ceiling;
the others: their figure for 1,024 x 1,024). An inline PDF's pages are counted from its
``/Type /Page`` objects; a URL PDF counts as ``URL_PDF_PAGES`` pages.
"""

from __future__ import annotations

import math
import re
import struct

from turnstate.core._media import FilePart, ImagePart, MediaPart

NEUTRAL = "anthropic"
"""The rule a provider-neutral count uses (a chat's stored ``history_chars``): the
highest of the three for common image sizes, so the estimate errs towards full."""

URL_PDF_PAGES = 5
PAGE_TOKENS = {"anthropic": 3_000, "openai": 1_500, "gemini": 258}
"""Tokens per PDF page: Anthropic's upper text figure plus nothing more (the page image
is within it, roughly); OpenAI's text plus a low page image; Gemini's documented 258."""

UNKNOWN_IMAGE_TOKENS = {"anthropic": 1_600, "openai": 765, "gemini": 1_032}
"""An image of unknown size: Anthropic's documented ceiling (about 1.15 megapixels);
OpenAI's and Gemini's figure for 1,024 x 1,024."""

_FAMILY = {"openai": "openai", "openai-compatible": "openai", "deepseek": "openai",
           "gemini": "gemini", "anthropic": "anthropic"}
_PAGE = re.compile(rb"/Type\s*/Page(?![s\w])")


def family_of(provider: str) -> str:
    """Which documented rule ``provider`` follows (unknown providers: the neutral one)."""
    return _FAMILY.get(provider, NEUTRAL)


def media_tokens(part: MediaPart, provider: str = NEUTRAL) -> int:
    """About how many input tokens ``part`` costs on ``provider``."""
    family = family_of(provider)
    if isinstance(part, FilePart):
        pages = pdf_pages(part.data) if part.data is not None else URL_PDF_PAGES
        return max(1, pages) * PAGE_TOKENS[family]
    size = image_size(part.data) if part.data is not None else None
    if size is None:
        return UNKNOWN_IMAGE_TOKENS[family]
    return image_tokens(*size, family)


def image_tokens(width: int, height: int, family: str) -> int:
    """An image of ``width`` x ``height`` pixels under ``family``'s rule."""
    width, height = max(1, width), max(1, height)
    if family == "openai":
        return _openai_tiles(width, height)
    if family == "gemini":
        if width <= 384 and height <= 384:
            return 258
        return math.ceil(width / 768) * math.ceil(height / 768) * 258
    scale = min(1.0, 1_568 / max(width, height), math.sqrt(1_150_000 / (width * height)))
    return max(1, math.ceil((width * scale) * (height * scale) / 750))


def _openai_tiles(width: int, height: int) -> int:
    scale = min(1.0, 2_048 / max(width, height))
    w, h = width * scale, height * scale
    shrink = min(1.0, 768 / min(w, h))
    w, h = w * shrink, h * shrink
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def pdf_pages(data: bytes) -> int:
    """The page objects in a PDF's bytes (0 when none can be seen, e.g. compressed
    object streams; ``media_tokens`` then counts one page)."""
    return len(_PAGE.findall(data))


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG, GIF, JPEG or WebP header; None when unreadable."""
    try:
        if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
            width, height = struct.unpack(">II", data[16:24])
            return int(width), int(height)
        if data[:6] in (b"GIF87a", b"GIF89a"):
            width, height = struct.unpack("<HH", data[6:10])
            return int(width), int(height)
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            return _webp_size(data)
        if data[:2] == b"\xff\xd8":
            return _jpeg_size(data)
    except struct.error:
        return None
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X":
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    if chunk == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    return None


_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE,
                  0xCF})


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """Walk the JPEG segments to the first start-of-frame marker."""
    at = 2
    while at + 9 < len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        length = struct.unpack(">H", data[at + 2:at + 4])[0]
        if marker in _SOF:
            height, width = struct.unpack(">HH", data[at + 5:at + 9])
            return width, height
        at += 2 + length
    return None


def is_media(part: object) -> bool:
    return isinstance(part, ImagePart | FilePart)
