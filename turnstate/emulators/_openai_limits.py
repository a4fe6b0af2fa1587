"""OpenAI's documented input rules both OpenAI emulators (Responses, Chat Completions)
enforce (wire9): image limits and JSON mode's word.

* Images, from the "Images and vision" guide's "Image input requirements": "Up to 20MB
  per image", "Up to 500 individual images per request", "Up to 50 MB image bytes per
  request". Counted over every image part the request carries (``input_image`` on
  Responses, ``image_url`` on Chat Completions, a tool output's images included); a
  size is measured on an inline (``data:``) image's base64, MB read as MiB (the lenient
  reading): one image up to the 27,962,028 characters of a 20 MiB file, as turnstate's
  own check (``core._capabilities.MEDIA_LIMITS``) holds it, and a request's images up
  to 50 MiB decoded (turnstate holds them to the stricter 50,000,000 base64 characters),
  so turnstate never sends what this refuses. An image by https URL counts toward the
  500 but has no size here.
* JSON mode (``json_object``): the API refuses a request whose messages never say
  "json" (any case). Chat Completions: 400 "'messages' must contain the word 'json' in
  some form, to use 'response_format' of type 'json_object'." (``param: messages``,
  observed in public reports); every message counts, ``system`` included. Responses:
  400 "Response input messages must contain the word 'json' in some form to use
  'text.format' of type 'json_object'." (observed); only input *messages* count, not
  ``instructions`` (reports agree the instructions are not read for it). The
  emulator reads the messages of the whole conversation the model sees (a chained
  ``previous_response_id`` included), the lenient reading of an undocumented detail.

The image refusals' exact words are not published; these are 400
``invalid_request_error`` bodies naming the limit.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

MAX_IMAGES = 500
MAX_IMAGE_BYTES = 20 * 1024 * 1024
MAX_IMAGE_CHARS = (MAX_IMAGE_BYTES + 2) // 3 * 4  # 27,962,028: a 20 MiB file's base64
MAX_REQUEST_IMAGE_BYTES = 50 * 1024 * 1024
IMAGE_TYPES = frozenset({"input_image", "image_url"})
TOO_MANY_IMAGES = "Too many images in request: {} images, the maximum is {}."
IMAGE_TOO_LARGE = ("Invalid image at '{}': about {} bytes, over the limit of {} bytes "
                   "(20MB).")
IMAGES_TOO_LARGE = ("Too much image data in request: {} bytes of images, over the limit "
                    "of {} bytes (50MB).")
CHAT_JSON_WORD = ("'messages' must contain the word 'json' in some form, to use "
                  "'response_format' of type 'json_object'.")
RESPONSES_JSON_WORD = ("Response input messages must contain the word 'json' in some form "
                       "to use 'text.format' of type 'json_object'.")


def _images(value: Any, where: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every image part inside ``value`` (any depth), with its path."""
    if isinstance(value, list):
        for index, item in enumerate(value):
            yield from _images(item, f"{where}[{index}]")
    elif isinstance(value, Mapping):
        if value.get("type") in IMAGE_TYPES:
            yield where, value
            return
        for key, item in value.items():
            yield from _images(item, f"{where}.{key}")


def _url(block: Mapping[str, Any]) -> Any:
    url = block.get("image_url")
    return url.get("url") if isinstance(url, Mapping) else url


def inline_chars(block: Mapping[str, Any]) -> int:
    """The base64 characters of an inline (``data:...;base64,``) image, 0 for a URL."""
    url = _url(block)
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        return 0
    return len(url) - url.index(";base64,") - len(";base64,")


def image_problem(value: Any, where: str) -> tuple[str, str] | None:
    """``(param, message)`` for images past OpenAI's documented limits, or None."""
    count = total = 0
    for path, block in _images(value, where):
        chars = inline_chars(block)
        if chars > MAX_IMAGE_CHARS:
            return path, IMAGE_TOO_LARGE.format(path, chars * 3 // 4, MAX_IMAGE_BYTES)
        count += 1
        total += chars * 3 // 4
    if count > MAX_IMAGES:
        return where, TOO_MANY_IMAGES.format(count, MAX_IMAGES)
    if total > MAX_REQUEST_IMAGE_BYTES:
        return where, IMAGES_TOO_LARGE.format(total, MAX_REQUEST_IMAGE_BYTES)
    return None


def says_json(texts: Iterator[str]) -> bool:
    """Whether any of ``texts`` contains the word "json" in any case."""
    return any("json" in text.lower() for text in texts)


def message_texts(content: Any) -> Iterator[str]:
    """The text of a message's ``content``: a string, or its text parts."""
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                yield part["text"]


def json_object_asked(fmt: Any) -> bool:
    """Whether a ``response_format`` / ``text.format`` object asks for JSON mode."""
    return isinstance(fmt, Mapping) and fmt.get("type") == "json_object"
