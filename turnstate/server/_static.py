"""The page and its files, sent gzipped to a browser that takes it.

``index.html``, the modules, the stylesheet and the vendored libraries went out as they
are (marked and DOMPurify: 52 KB and 22 KB, about a third of that gzipped), and every
load revalidates them (``Cache-Control: no-cache``, their ``ETag``: a 304 then). aiohttp
compresses a ``FileResponse`` whose compression is enabled when the request's
``Accept-Encoding`` takes gzip or deflate (it then streams the file instead of
``sendfile``); a file already sent as a 304 sends nothing. The API's answers are left
as they are: a turn's request passes through none of this.
"""

from __future__ import annotations

from aiohttp import web

_CONDITIONS = frozenset({"If-None-Match", "If-Modified-Since", "If-Match",
                         "If-Unmodified-Since", "Range", "If-Range"})
"""Headers that may make the answer a 304, a 412 or a range: those go out as they are
(aiohttp would write an empty gzip stream as a 304's body, and a range of compressed
bytes is not the range asked for)."""


def compressed(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """``response`` (not yet sent), compressed when the client takes it and asked for
    the whole file unconditionally (a browser's first load; a revalidation is a 304)."""
    if isinstance(response, web.FileResponse):
        response.headers["Vary"] = "Accept-Encoding"
        if request.method == "GET" and _CONDITIONS.isdisjoint(request.headers):
            response.enable_compression()
    return response


class CompressedStatic(web.StaticResource):
    """``add_static``'s resource, its files sent ``compressed``."""

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        return compressed(request, await super()._handle(request))
