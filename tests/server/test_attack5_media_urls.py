"""A media URL a provider (or an operator's gateway, which fetches from inside its own
network) would fetch must name a public host: ``localhost``, loopback, private,
link-local (the cloud metadata address) and reserved address literals, numbers a fetcher
reads as an address, and credentials in the URL are refused with a 400 naming the part;
nothing is started or stored."""

from __future__ import annotations

import pytest

from tests.server.support import Api, turn_body
from turnstate.core._media import url_problem

REFUSED = ["https://169.254.169.254/latest/meta-data/", "https://127.0.0.1/cat.png",
           "https://localhost:8443/cat.png", "https://svc.localhost/cat.png",
           "https://10.1.2.3/cat.png", "https://192.168.0.10/cat.png",
           "https://[::1]/cat.png", "https://[::ffff:127.0.0.1]/cat.png",
           "https://[fd00::5]/cat.png", "https://100.64.0.1/cat.png",
           "https://2130706433/cat.png", "https://0x7f.1/cat.png",
           "https://0177.0.0.1/cat.png", "https://user:secret@example.com/cat.png"]
TAKEN = ["https://example.com/cat.png", "https://8.8.8.8/cat.png",
         "https://[2001:4860:4860::8888]/cat.png", "https://cdn.example.com./cat.png",
         "https://10.example.com/cat.png"]


@pytest.mark.parametrize("url", REFUSED)
def test_an_internal_or_credentialed_url_has_a_problem(url: str) -> None:
    assert url_problem(url) is not None


@pytest.mark.parametrize("url", TAKEN)
def test_a_public_url_has_none(url: str) -> None:
    assert url_problem(url) is None


@pytest.mark.parametrize("url", ["https://169.254.169.254/latest/meta-data/",
                                 "https://[::ffff:127.0.0.1]/cat.png",
                                 "https://2130706433/cat.png"])
async def test_the_turn_route_refuses_it_naming_the_part(api: Api, url: str) -> None:
    chat_id = await api.new_chat()
    body = turn_body("look", content=[{"type": "image", "mediaType": "image/png",
                                       "url": url}])
    answer = await api.json("POST", f"/api/chats/{chat_id}/turns", status=400, json=body)
    assert answer["field"] == "content[0].url", answer
    assert (await api.services.store.load_messages(chat_id, limit=10)).messages == ()


async def test_the_ui_route_refuses_a_file_part_to_the_metadata_address(api: Api) -> None:
    chat_id = await api.new_chat()
    body = {"id": chat_id, "provider": "openai", "model": "gpt-4o", "messages": [
        {"role": "user", "parts": [
            {"type": "text", "text": "read this"},
            {"type": "file", "mediaType": "application/pdf",
             "url": "https://169.254.169.254/latest/user-data"}]}]}
    response = await api.call("POST", "/api/ui-messages", json=body)
    assert response.status == 400, await response.text()
    assert "url" in (await response.json())["field"]
    assert (await api.services.store.load_messages(chat_id, limit=10)).messages == ()
