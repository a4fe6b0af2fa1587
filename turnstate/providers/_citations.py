"""Reading citations off the wires (``core._citations`` says what each one gives).

Every reader takes the decoded JSON as it came and returns the ``Citation``s it could
read; anything else (a citation that is no object, has no ``type``, or a field of the
wrong type) is skipped, and a list that is no list gives none: a bad citation never
fails a turn, and the text it was on is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from turnstate.core._citations import Citation


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _items(value: Any) -> Iterable[dict[str, Any]]:
    return (item for item in value if type(item) is dict) if isinstance(value, list) else ()


def openai_citation(item: dict[str, Any]) -> Citation | None:
    """One Responses ``output_text`` annotation (flat) or Chat Completions annotation
    (its fields under the object named by its type, ``url_citation``)."""
    kind = _text(item.get("type"))
    if kind is None:
        return None
    nested = item.get(kind)
    fields = nested if type(nested) is dict else item
    index = _int(fields.get("index"))
    return Citation(kind=kind, url=_text(fields.get("url")),
                    title=_text(fields.get("title")) or _text(fields.get("filename")),
                    start=_int(fields.get("start_index")) if index is None else index,
                    end=_int(fields.get("end_index")),
                    source_id=_text(fields.get("file_id")))


_SOURCE_SPANS = (("start_char_index", "end_char_index"),
                 ("start_page_number", "end_page_number"),
                 ("start_block_index", "end_block_index"))
"""Anthropic's location in the cited document: characters, pages or content blocks."""


def anthropic_citation(item: dict[str, Any]) -> Citation | None:
    """One Anthropic text-block citation (or a ``citations_delta``'s ``citation``)."""
    kind = _text(item.get("type"))
    if kind is None:
        return None
    source = _text(item.get("source"))  # search_result_location: a URL or an id
    url = _text(item.get("url")) or (source if source and "://" in source else None)
    document = item.get("document_index")
    source_id = str(document) if _int(document) is not None else (
        _text(item.get("file_id")) or (None if url else source))
    start = end = None
    for start_key, end_key in _SOURCE_SPANS:  # the one the citation's kind has
        start, end = _int(item.get(start_key)), _int(item.get(end_key))
        if start is not None or end is not None:
            break
    return Citation(kind=kind, url=url,
                    title=_text(item.get("title")) or _text(item.get("document_title")),
                    cited_text=_text(item.get("cited_text")), source_id=source_id,
                    source_start=start, source_end=end)


def gemini_citation(item: dict[str, Any]) -> Citation | None:
    """One Gemini Interactions text annotation: ``url`` or ``source``, a byte span."""
    source = _text(item.get("source"))
    url = _text(item.get("url")) or (source if source and "://" in source else None)
    if url is None and source is None:
        return None
    return Citation(kind=_text(item.get("type")) or "url_citation", url=url,
                    title=_text(item.get("title")),
                    start=_int(item.get("start_index")), end=_int(item.get("end_index")),
                    source_id=None if url else source)


def shifted(citations: tuple[Citation, ...], offset: int) -> tuple[Citation, ...]:
    """``citations`` with their spans of the answer's text moved by ``offset`` (the text
    of the blocks before theirs, now joined to it)."""
    return tuple(attrs.evolve(c, start=None if c.start is None else c.start + offset,
                              end=None if c.end is None else c.end + offset)
                 for c in citations)


Reader = Callable[[dict[str, Any]], Citation | None]


def read_citations(value: Any, reader: Reader) -> tuple[Citation, ...]:
    """The citations ``reader`` makes of the list ``value``; the rest skipped."""
    if not value:
        return ()
    found = []
    for item in _items(value):
        try:
            citation = reader(item)
        except (TypeError, ValueError, AttributeError):  # never fail the turn on one
            citation = None
        if citation is not None:
            found.append(citation)
    return tuple(found)
