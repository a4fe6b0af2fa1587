"""The Anthropic emulator's request limits (emul7): the body's size, the media a request
may carry and the content a message must have, each refused as the real Messages API does.

* A body over ``MAX_REQUEST_BYTES`` (the Messages API's documented 32 MB, read as
  32,000,000 bytes, the stricter reading): ``413 request_too_large`` ("Request exceeds the
  maximum size"), before the body is parsed (Cloudflare refuses it in front of the API).
* More than ``MAX_MEDIA`` images and documents in the whole request (messages and tool
  results; the API's documented 100 per request): 400 "too many images and documents:
  I + D > 100".
* An inline image whose base64 data passes ``MAX_IMAGE_BYTES`` (10,485,760, the limit
  ``core._capabilities.MEDIA_LIMITS`` holds turns to): 400 "messages.N.content.M.image.
  source.base64: image exceeds 10 MB maximum: X bytes > 10485760 bytes".
* A message with no content (``""`` or ``[]``), except a final assistant message (a
  prefill): 400 "messages.N: all messages must have non-empty content except for the
  optional final assistant message"; an empty text block in a ``system`` list or inside a
  ``tool_result``: 400 "... text content blocks must be non-empty" (as in a message's
  own blocks, ``_anthropic_checks.check_text_blocks``).

Not enforced, by choice: a first message in the ``assistant`` role. The API's reference
once said "The first message must always use the `user` role" (and its 400 "messages:
first message must use the "user" role" was observed in 2024); the current reference
drops that sentence and says consecutive same-role turns are combined into one, so the
rule is no longer documented.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from turnstate.emulators._anthropic_checks import EMPTY_TEXT, AnthropicError

MAX_REQUEST_BYTES = 32_000_000
MAX_MEDIA = 100
MAX_IMAGE_BYTES = 10_485_760
IMAGE_TOO_LARGE = ("{}.image.source.base64: image exceeds 10 MB maximum: {} bytes > "
                   f"{MAX_IMAGE_BYTES} bytes")
TOO_LARGE = "Request exceeds the maximum size"
TOO_MANY_MEDIA = "too many images and documents: {} + {} > {}"
NO_CONTENT = ("messages.{}: all messages must have non-empty content except for the "
              "optional final assistant message")
EMPTY_SYSTEM_TEXT = "system: text content blocks must be non-empty"


def check_size(size: int) -> AnthropicError | None:
    """A body over 32 MB: the 413 ``request_too_large`` the API's front answers with."""
    if size > MAX_REQUEST_BYTES:
        return AnthropicError(status=413, type="request_too_large", message=TOO_LARGE)
    return None


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def _media(blocks: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    images = documents = 0
    for block in blocks:
        kind = block.get("type")
        images += kind == "image"
        documents += kind == "document"
        if kind == "tool_result":
            nested = _media(_blocks(block.get("content")))
            images, documents = images + nested[0], documents + nested[1]
    return images, documents


def check_media_count(messages: Sequence[Mapping[str, Any]]) -> AnthropicError | None:
    """At most 100 images and documents in one request, tool results included."""
    images = documents = 0
    for message in messages:
        found = _media(_blocks(message.get("content")))
        images, documents = images + found[0], documents + found[1]
    if images + documents > MAX_MEDIA:
        return AnthropicError(status=400,
                              message=TOO_MANY_MEDIA.format(images, documents, MAX_MEDIA))
    return None


def check_image_sizes(messages: Sequence[Mapping[str, Any]]) -> AnthropicError | None:
    """No inline image over 10 MB of base64 (tool results' images included)."""
    for index, message in enumerate(messages):
        found = _large_image(_blocks(message.get("content")), f"messages.{index}")
        if found is not None:
            return AnthropicError(status=400, message=found)
    return None


def _large_image(blocks: Sequence[Mapping[str, Any]], where: str) -> str | None:
    for position, block in enumerate(blocks):
        path = f"{where}.content.{position}"
        source = block.get("source")
        data = source.get("data") if isinstance(source, Mapping) else None
        if block.get("type") == "image" and isinstance(data, str) and len(
                data) > MAX_IMAGE_BYTES:
            return IMAGE_TOO_LARGE.format(path, len(data))
        if block.get("type") == "tool_result":
            found = _large_image(_blocks(block.get("content")), path)
            if found is not None:
                return found
    return None


def check_content(body: Mapping[str, Any]) -> AnthropicError | None:
    """Every message but a final assistant one has content; no empty text block in the
    ``system`` list or inside a ``tool_result``."""
    messages = body["messages"]
    for index, message in enumerate(messages):
        content = message.get("content")
        prefill = index == len(messages) - 1 and message.get("role") == "assistant"
        if content in ("", []) and not prefill:
            return AnthropicError(status=400, message=NO_CONTENT.format(index))
        for block in _blocks(content):
            if block.get("type") == "tool_result" and any(
                    b.get("type") == "text" and b.get("text") == ""
                    for b in _blocks(block.get("content"))):
                return AnthropicError(status=400, message=EMPTY_TEXT)
    if any(b.get("type") == "text" and b.get("text") == "" for b in _blocks(body.get("system"))):
        return AnthropicError(status=400, message=EMPTY_SYSTEM_TEXT)
    return None
