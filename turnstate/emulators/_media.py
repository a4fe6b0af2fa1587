"""Images and files as the emulators read them off every wire (issue 23).

``user_item`` turns a user message's content (a string, or a list of content parts in
any of the five wire formats) into one ``user`` item: its text, and a description of
each image or file (``core._media.describe``'s words: ``an image/png of 1,024 bytes``,
``an image at https://...``), which the scripted model echoes in its answer.
``token_view`` is what the emulators count usage over: media parts cost their
documented tokens (``core._media_tokens``), not their base64 length.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import zlib
from collections.abc import Mapping
from typing import Any

from turnstate.core._context import CHARS_PER_TOKEN
from turnstate.core._json import canonical_json
from turnstate.core._media import FilePart, ImagePart, MediaPart, describe
from turnstate.core._media_tokens import media_tokens
from turnstate.emulators._conversation_model import Item

_TEXT_TYPES = frozenset({"text", "input_text"})
_IMAGE_TYPES = frozenset({"image", "input_image", "image_url"})
_FILE_TYPES = frozenset({"document", "input_file", "file"})


def user_item(content: Any) -> Item:
    """A user message's content as one item (text joined, media described)."""
    if isinstance(content, str):
        return Item(kind="user", text=content)
    text: list[str] = []
    media: list[str] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind in _TEXT_TYPES and isinstance(block.get("text"), str):
            text.append(block["text"])
        elif kind in _IMAGE_TYPES or kind in _FILE_TYPES:
            media.append(describe_block(block))
    return Item(kind="user", text="".join(text), media=tuple(media))


def is_media(block: Mapping[str, Any]) -> bool:
    return block.get("type") in _IMAGE_TYPES or block.get("type") in _FILE_TYPES


def describe_block(block: Mapping[str, Any]) -> str:
    """One image or file content part of any wire, described (``core._media.describe``)."""
    part = block_part(block)
    if part is None:
        return f"an {_inline_type(block)} of undecodable base64"
    return describe(part)


def block_part(block: Mapping[str, Any]) -> MediaPart | None:
    """The ``ImagePart`` or ``FilePart`` an image or file content part of any wire
    carries; None when its base64 does not decode."""
    kind = block.get("type")
    image = kind in _IMAGE_TYPES
    source = block.get("source")
    if kind == "image_url":  # Chat Completions: {"image_url": {"url": ...}}
        url = _get(block.get("image_url"), "url")
    elif kind == "file":  # Chat Completions: {"file": {"file_data": ...}}
        url = _get(block.get("file"), "file_data")
    elif kind == "input_image":
        url = block.get("image_url")
    elif kind == "input_file":
        url = block.get("file_data") or block.get("file_url")
    elif isinstance(source, Mapping):  # Anthropic: a base64 or url source
        if source.get("type") == "base64":
            return _inline(image, source.get("media_type"), source.get("data"))
        url = source.get("url")
    elif isinstance(block.get("data"), str):  # Gemini: data + mime_type, or uri
        return _inline(image, block.get("mime_type"), block.get("data"))
    else:
        url = block.get("uri")
    if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return _inline(image, head, data)
    text = str(url)
    return ImagePart(url=text) if image else FilePart(url=text)


def token_view(value: Any, provider: str) -> Any:
    """``value`` (a request's JSON) with every image and file part replaced by as many
    characters as its tokens take (``media_tokens``, four characters a token): what the
    emulators count usage over, so an image costs its documented tokens, not its
    base64 length."""
    if isinstance(value, list):
        return [token_view(item, provider) for item in value]
    if not isinstance(value, Mapping):
        return value
    if is_media(value):
        part = block_part(value)
        tokens = media_tokens(part, provider) if part is not None else 0
        # The digest keeps two different images apart in a prompt cache's segments.
        digest = hashlib.sha256(canonical_json(value).encode()).hexdigest()[:16]
        return {"type": value.get("type"), "digest": digest,
                "tokens": "x" * (CHARS_PER_TOKEN * tokens)}
    return {key: token_view(item, provider) for key, item in value.items()}


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, Mapping) else None


def _inline_type(block: Mapping[str, Any]) -> Any:
    source = block.get("source")
    return _get(source, "media_type") or block.get("mime_type")


def _inline(image: bool, media_type: Any, data: Any) -> MediaPart | None:
    try:
        raw = base64.b64decode(str(data), validate=True)
    except (binascii.Error, ValueError):
        return None
    kind = str(media_type)
    return ImagePart(media_type=kind, data=raw) if image else FilePart(media_type=kind, data=raw)


def generated_png(seed: str) -> bytes:
    """A 1x1 PNG whose colour ``seed`` picks: the image a scripted model generates."""
    colour = hashlib.sha256(seed.encode()).digest()[:3]

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data).to_bytes(4, "big")
        return len(data).to_bytes(4, "big") + kind + data + crc

    header = (1).to_bytes(4, "big") * 2 + bytes((8, 2, 0, 0, 0))  # 8-bit RGB
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(b"\x00" + colour)) + chunk(b"IEND", b""))


def generated_image(interaction_id: str, index: int) -> dict[str, Any]:
    """Gemini's ``image`` content block of the ``index``-th image of an interaction."""
    data = generated_png(f"{interaction_id}:{index}")
    return {"type": "image", "data": base64.b64encode(data).decode(), "mime_type": "image/png"}
