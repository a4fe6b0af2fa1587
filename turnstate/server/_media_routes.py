"""``GET /api/chats/{id}/messages/{seq}/parts/{index}``: the inline bytes of an image or
PDF a user attached, as the chat view's ``src`` names them (issue 23 item 2).

The page fetches them with its token and shows them through a ``blob:`` URL, so the
page's policy needs no other image source. The answer is the stored bytes with their
stored media type (one of the four image types or PDF, checked when the turn was
taken), ``nosniff`` and a policy that lets nothing in it run; a PDF comes as an
attachment under its file name.
"""

from __future__ import annotations

from urllib.parse import quote

from aiohttp import web

from turnstate.core import ImagePart
from turnstate.server._content import MAX_PARTS
from turnstate.server._http import OWNER, ApiError, reject
from turnstate.server._routes import seq_param, services_of, whole_number

ROUTES = web.RouteTableDef()


def _index(request: web.Request) -> int:
    raw = request.match_info["index"]
    if not whole_number(raw) or int(raw) >= MAX_PARTS:
        reject("index", f"index must be a whole number below {MAX_PARTS}")
    return int(raw)


@ROUTES.get("/api/chats/{chat_id}/messages/{seq}/parts/{index}")
async def get_part(request: web.Request) -> web.Response:
    chat_id, seq, index = request.match_info["chat_id"], seq_param(request), _index(request)
    part = await services_of(request).store.load_media_part(  # that part's bytes alone
        chat_id, seq, index, owner=request[OWNER])
    if part is None or part.data is None or part.media_type is None:
        raise ApiError(404, "part_not_found", f"message {seq} has no inline part {index}")
    if isinstance(part, ImagePart):
        disposition = "inline"
    else:
        name = part.filename or f"message-{seq}-part-{index}.pdf"
        disposition = f"attachment; filename*=UTF-8''{quote(name, safe='')}"
    return web.Response(body=part.data, content_type=part.media_type, headers={
        "Content-Disposition": disposition,
        "Content-Security-Policy": "default-src 'none'; sandbox"})
