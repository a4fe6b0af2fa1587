"""Media bytes kept apart from the parts column (PostgreSQL schema version 14, SQLite 11).

A user message's images and PDFs were base64 text inside its ``parts`` JSON, so every
read of the column, lean ones included, read the bytes from disk: a 16 MiB image is a
22 MB value PostgreSQL de-TOASTs whole and SQLite reads page by page. Both stores now
keep the bytes elsewhere (PostgreSQL a ``bytea[]`` column, SQLite a ``message_media``
table) and leave in the part its ``size`` (bytes) and ``media`` (its place among the
message's blobs, from 1); a lean read reads the parts alone. A part may still hold its
``data`` inline (a message written before, or by a writer that does not set it apart):
every read takes both forms.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import attrs

from turnstate.core._conversation import Part
from turnstate.core._errors import StorageError
from turnstate.core._media import FilePart, ImagePart
from turnstate.core._media_tokens import media_tokens
from turnstate.storage._records import decode_parts, encode_parts


def parts_with_media(text: str, media: Sequence[bytes | None]) -> tuple[Part, ...]:
    """A full read's parts: ``text`` (the ``parts`` column) with each image's and file's
    bytes put back from ``media`` (the message's blobs, in place order; no base64 on
    either side).

    Raises:
        StorageError: the column is unreadable, or a part names bytes ``media`` lacks.
    """
    parts = list(decode_parts(text))  # the media parts without their bytes
    for index, item in enumerate(json.loads(text)):  # small: no bytes in it
        place = item.get("media") if type(item) is dict else None
        if place is None:
            continue
        data = media[place - 1] if type(place) is int and 0 < place <= len(media) else None
        part = parts[index]
        if data is None or not isinstance(part, ImagePart | FilePart):
            msg = f"stored message parts are unreadable: part {index} has no media bytes"
            raise StorageError(msg)
        parts[index] = attrs.evolve(part, data=bytes(data))
    return tuple(parts)


def media_apart(parts: Sequence[Part]) -> tuple[str, list[bytes]]:
    """The parts column of ``parts`` with each inline image's and file's bytes set apart:
    the JSON text (``size`` and ``media`` in place of ``data``, ``tokens`` from the real
    bytes) and the blobs, in place order. Parts without inline media: ``encode_parts``."""
    held = [(i, p) for i, p in enumerate(parts)
            if isinstance(p, ImagePart | FilePart) and p.data is not None]
    if not held:
        return encode_parts(parts), []
    shown = list(parts)
    for i, part in held:
        shown[i] = attrs.evolve(part, data=None)
    tree = json.loads(encode_parts(shown))
    blobs: list[bytes] = []
    for i, part in held:
        data = part.data or b""
        blobs.append(data)
        tree[i].update(tokens=media_tokens(part), size=len(data), media=len(blobs))
    return json.dumps(tree, separators=(",", ":")), blobs
