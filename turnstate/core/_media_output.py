"""Media a model generates (an image of Gemini's image models): kept with the answer.

A generated image is an ``ImagePart`` of the assistant message, stored, served and
replayed as a user's image is (its bytes apart in the stores, the media route, the
chat view's ``src``). A codec reads each image whole (``output_image``), within the
bytes one response may hold (``OutputMedia``): an image past them, or one whose bytes
are not the image its type says, becomes its placeholder text (``skipped_text``), so
the answer keeps a trace of it and no memory grows without bound.

Replayed to another provider, an answer's image goes as ``answer_image_text``: no other
wire takes an image in an assistant message (Anthropic, OpenAI and Chat Completions
take images from the user alone).
"""

from __future__ import annotations

import binascii

import attrs

from turnstate.core._conversation import TextPart
from turnstate.core._media import IMAGE_TYPES, ImagePart, decoded_base64, part_problem

MAX_OUTPUT_MEDIA_BYTES = 20 << 20
"""The generated image bytes one response may hold (20 MiB, as a turn's inline input;
``OutputMedia``): past them an image is its placeholder text."""


@attrs.define
class OutputMedia:
    """The generated media bytes one response has kept so far, against ``limit``."""

    limit: int = MAX_OUTPUT_MEDIA_BYTES
    kept: int = 0

    def image(self, media_type: object, data: object) -> ImagePart | TextPart:
        """The image of a wire block (``media_type``, base64 ``data``), or its
        placeholder text when it is past the limit or not a usable image."""
        kind = media_type.lower() if isinstance(media_type, str) else None
        if not isinstance(data, str) or not data:
            return skipped_text(kind, None, "no inline data")
        size = len(data) // 4 * 3  # an upper bound, read before anything is decoded
        if self.kept + size > self.limit + 2:
            return skipped_text(kind, size, f"past the {self.limit:,} bytes a response "
                                            "may hold")
        try:
            raw = decoded_base64(data)
        except (binascii.Error, ValueError):
            return skipped_text(kind, None, "its data is not base64")
        part = ImagePart(media_type=kind, data=raw)
        if kind not in IMAGE_TYPES:
            return skipped_text(kind, len(raw), f"not one of {sorted(IMAGE_TYPES)}")
        problem = part_problem(part)
        if problem is not None:
            return skipped_text(kind, len(raw), f"{problem[0]} {problem[1]}")
        self.kept += len(raw)
        return part


def skipped_text(media_type: str | None, size: int | None, why: str) -> TextPart:
    """The text kept in place of a generated image that was not kept."""
    said = media_type or "an unknown type"
    if size is not None:
        said += f", {size:,} bytes"
    return TextPart(text=f"\n[generated image not kept ({said}): {why}]\n")


def answer_image_text(part: ImagePart) -> str:
    """The text an answer's image is replayed as to a wire without assistant images."""
    size = "" if part.data is None else f", {len(part.data):,} bytes"
    return f"\n[the assistant generated an image here ({part.media_type}{size})]\n"
