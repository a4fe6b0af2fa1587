"""Citations: the sources an answer's text was grounded in, as the providers name them.

A ``Citation`` rides on the ``TextPart`` it annotates and is stored with it. Only what
the wires give is kept, as typed fields (never the raw payload):

* OpenAI Responses ``output_text.annotations``: ``url_citation`` (url, title, start and
  end in the text), ``file_citation`` and ``file_path`` (file id, filename as title,
  ``index`` as start), ``container_file_citation`` (file id, filename, span).
* Chat Completions ``message.annotations`` / ``delta.annotations``: ``url_citation``
  with its object under ``url_citation`` (url, title, span).
* Anthropic text blocks' ``citations`` and the ``citations_delta`` stream event:
  ``char_location``, ``page_location``, ``content_block_location`` (document index as
  ``source_id``, document title, the location in the document as ``source_start`` /
  ``source_end``), ``web_search_result_location`` (url, title), ``search_result_location``
  (its ``source`` as url when it is one, else ``source_id``); each with ``cited_text``.
* Gemini Interactions text ``annotations`` and ``text_annotation_delta``: ``url`` or
  ``source`` and a span in bytes of the text.

``start`` / ``end`` are a span of the answer's text in the wire's own unit (characters
for OpenAI, bytes for Gemini); Anthropic's citation covers the whole text block it is
attached to and has none. A kind turnstate does not know is kept with the fields it
shares with the known ones; a malformed citation is dropped, never the text.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs


@attrs.frozen(kw_only=True)
class Citation:
    """One source an answer's text cites.

    Attributes:
        kind: the wire's type (``url_citation``, ``file_citation``, ``char_location``,
            ``web_search_result_location``, ...).
        url: the cited web page, when the source is one.
        title: the page's or document's title (a file's name).
        start: where the cited span of the answer's text starts (the wire's unit).
        end: where it ends, exclusive.
        cited_text: the source's text the answer relied on (Anthropic).
        source_id: the cited file or document (``file_id``, Anthropic's document index).
        source_start: the cited location's start in the source (characters, pages or
            blocks, as ``kind`` says; Anthropic).
        source_end: its end (Anthropic).
    """

    kind: str
    url: str | None = None
    title: str | None = None
    start: int | None = None
    end: int | None = None
    cited_text: str | None = None
    source_id: str | None = None
    source_start: int | None = None
    source_end: int | None = None


def _tuple(value: Iterable[Citation]) -> tuple[Citation, ...]:
    return value if type(value) is tuple else tuple(value)


def citations_field() -> tuple[Citation, ...]:
    """The ``TextPart.citations`` field: a tuple, empty by default."""
    return attrs.field(default=(), converter=_tuple)


LINK_SCHEMES = ("http://", "https://")
"""The URL schemes a citation may be shown as a link with (lower case)."""


def is_link(url: object) -> bool:
    """Whether ``url`` is an http(s) URL with something after the scheme (what a page
    may make a link of)."""
    if not isinstance(url, str):
        return False
    head = url[:8].lower()
    return any(head.startswith(scheme) and len(url) > len(scheme) for scheme in LINK_SCHEMES)


def cited_urls(citations: Iterable[Citation]) -> list[tuple[str, str | None]]:
    """The distinct http(s) URLs ``citations`` name, first seen first, each with the
    first title given for it: the answer's sources as links."""
    seen: dict[str, str | None] = {}
    for citation in citations:
        url = citation.url
        if url is not None and is_link(url) and seen.get(url) is None:
            seen[url] = citation.title
    return list(seen.items())
