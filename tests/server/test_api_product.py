"""The API and its static files as a product: every error is the same typed JSON
(``status``, ``error``: the code, ``message``: what to do), 404 and 405 included, and the
page's files go out compressed, revalidated by their ETag."""

from __future__ import annotations

import pytest

from tests.server.support import Api

STATIC = ["/", "/static/app.js", "/static/style.css", "/static/vendor/marked.esm.js"]


@pytest.mark.parametrize("path", STATIC)
async def test_the_page_s_files_go_out_gzipped_and_revalidate(api: Api, path: str) -> None:
    plain = await api.client.get(path, headers={"Accept-Encoding": "identity"})
    body = await plain.read()
    assert plain.status == 200 and "Content-Encoding" not in plain.headers
    zipped = await api.client.get(path, headers={"Accept-Encoding": "gzip"})
    assert zipped.headers.get("Content-Encoding") == "gzip"
    assert await zipped.read() == body  # decompressed by the client
    assert "Accept-Encoding" in zipped.headers.get("Vary", "")
    assert zipped.headers["Cache-Control"] == "no-cache"  # revalidated on every load
    again = await api.client.get(path, headers={
        "Accept-Encoding": "gzip", "If-None-Match": zipped.headers["ETag"]})
    assert again.status == 304 and await again.read() == b""


async def test_an_unknown_route_or_method_is_typed_json_saying_what_to_do(api: Api) -> None:
    missing = await api.json("GET", "/api/nope", status=404)
    assert missing == {"status": 404, "error": "no_route",
                       "message": "no route GET /api/nope: see docs/server.md for the API"}
    wrong = await api.call("PUT", "/api/chats")
    assert wrong.status == 405 and wrong.headers["Allow"] == "GET,HEAD,POST"
    assert await wrong.json() == {
        "status": 405, "error": "method_not_allowed",
        "message": "/api/chats takes GET, HEAD or POST, not PUT"}
    chat = await api.json("GET", "/api/chats/nope", status=404)
    assert chat == {"status": 404, "error": "not_found", "message": "no such chat"}
    folder = await api.client.get("/static/vendor")
    assert await folder.json() == {"status": 403, "error": "forbidden",
                                   "message": "/static/vendor is a folder: name one of its files"}
    unauthorized = await api.client.get("/api/chats")
    assert (await unauthorized.json())["status"] == 401
