"""Images and files as the emulators read them off every wire (issue 23).

``user_item`` turns a user message's content (a string, or a list of content parts in
any of the five wire formats) into one ``user`` item: its text, and a description of
each image or file (``core._media.describe``'s words: ``an image/png of 1,024 bytes``,
``an image at https://...``), which the scripted model echoes in its answer.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

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
    """One image or file content part of any wire, described."""
    kind = block.get("type")
    noun = "an image" if kind in _IMAGE_TYPES else "a document"
    if kind == "image_url":  # Chat Completions: {"image_url": {"url": ...}}
        inner = block.get("image_url")
        return _from_url(inner.get("url") if isinstance(inner, Mapping) else None, noun)
    if kind == "file":  # Chat Completions: {"file": {"file_data": ...}}
        inner = block.get("file")
        return _from_url(inner.get("file_data") if isinstance(inner, Mapping) else None, noun)
    if kind == "input_image":
        return _from_url(block.get("image_url"), noun)
    if kind == "input_file":
        return _from_url(block.get("file_data") or block.get("file_url"), noun)
    source = block.get("source")
    if isinstance(source, Mapping):  # Anthropic: a base64 or url source
        if source.get("type") == "base64":
            return _inline(source.get("media_type"), source.get("data"))
        return _from_url(source.get("url"), noun)
    if isinstance(block.get("data"), str):  # Gemini: data + mime_type, or uri
        return _inline(block.get("mime_type"), block.get("data"))
    return _from_url(block.get("uri"), noun)


def _from_url(url: Any, noun: str) -> str:
    if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return _inline(head, data)
    return f"{noun} at {url}"


def _inline(media_type: Any, data: Any) -> str:
    try:
        size = len(base64.b64decode(str(data), validate=True))
    except (binascii.Error, ValueError):
        return f"an {media_type} of undecodable base64"
    return f"an {media_type} of {size:,} bytes"
