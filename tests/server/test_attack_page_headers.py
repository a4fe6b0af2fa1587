"""The headers the page and its files are served with: nothing in them may be framed,
no injected ``<base>`` or form may send the page elsewhere."""

from __future__ import annotations

import pytest

from tests.server.support import Api


@pytest.mark.parametrize("path", ["/", "/static/app.js", "/static/style.css", "/favicon.ico"])
async def test_the_page_and_its_files_carry_the_full_policy(api: Api, path: str) -> None:
    response = await api.client.get(path)
    assert response.status == 200
    policy = {d.split()[0]: d.split()[1:] for d in
              response.headers["Content-Security-Policy"].split("; ")}
    assert policy["default-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"] and policy["base-uri"] == ["'none'"]
    assert policy["form-action"] == ["'self'"] and policy["frame-ancestors"] == ["'none'"]
    assert "'unsafe-inline'" not in response.headers["Content-Security-Policy"]
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "no-referrer"
