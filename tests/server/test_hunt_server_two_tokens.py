"""A request with two ``Authorization`` headers is refused, not read by its first.

The field is a singleton (RFC 9110): with two, the server took the first one's owner,
where a proxy or gateway in front of it may read the last (``bob`` authenticated at the
proxy, ``alice`` served by the API), so the request names no owner it can trust.
"""

from __future__ import annotations

from multidict import CIMultiDict

from tests.server.support import Api


async def test_two_authorization_headers_are_a_401(api: Api) -> None:
    for first, second in (("alice", "bob"), ("bob", "alice"), ("alice", "alice")):
        headers = CIMultiDict([("Authorization", f"Bearer {first}-token"),
                               ("Authorization", f"Bearer {second}-token")])
        response = await api.client.get("/api/chats", headers=headers)
        assert response.status == 401, await response.text()
        assert (await response.json())["error"] == "unauthorized"
    assert (await api.client.get("/api/chats", headers=api.headers())).status == 200
