"""A media URL whose host folds to an internal one is refused like the ASCII name.

``url_problem`` refuses ``localhost`` and non-global address literals by their ASCII
form, but every fetcher folds a host of other characters to ASCII first (IDNA: the
WHATWG URL parser of a browser or Node, ``requests``, ``yarl``): full-width letters and
digits, compatibility forms (``ℓ``, ``①``), a soft hyphen and the ideographic full stop.
``https://ｌｏｃａｌｈｏｓｔ/`` or ``https://１２７。０。０。１/`` passed the check and
named the loopback address to the provider or the operator's gateway that fetches it.
"""

from __future__ import annotations

import pytest

from tests.server.support import Api, turn_body
from turnstate.core._text import fetched_host

FOLDED = ["https://ｌｏｃａｌｈｏｓｔ/a.png", "https://１２７.０.０.１/a.png",
          "https://127。0。0。1/a.png", "https://ℓocalhost/a.png",
          "https://①⑥⑨.２５４.１６９.２５４/latest/meta-data", "https://loca\u00adlhost/a.png",
          "https://１０.０.０.１/a.png", "https://x.ｌｏｃａｌｈｏｓｔ/a.png"]


@pytest.mark.parametrize("url", FOLDED)
async def test_a_host_that_folds_to_an_internal_one_is_refused(api: Api, url: str) -> None:
    chat = await api.new_chat()
    body = turn_body("what is this?", content=[{"type": "image", "url": url}])
    response = await api.call("POST", f"/api/chats/{chat}/turns", json=body)
    assert response.status == 400, await response.text()
    answer = await response.json()
    assert answer["field"] == "content[0].url", answer


async def test_a_ui_file_part_whose_host_folds_inward_is_refused(api: Api) -> None:
    chat = await api.new_chat()
    message = {"id": "m1", "role": "user", "parts": [
        {"type": "text", "text": "what is this?"},
        {"type": "file", "mediaType": "image/png", "url": "https://１２７.０.０.１/a.png"}]}
    response = await api.call("POST", "/api/ui-messages", json={
        "id": chat, "messages": [message], "provider": "openai", "model": "gpt-4o"})
    assert response.status == 400, await response.text()
    assert (await response.json())["field"] == "messages[0].parts[1].url"


async def test_a_public_international_host_is_taken(api: Api) -> None:
    chat = await api.new_chat()
    events = await api.turn(chat, text="what is this?",
                            content=[{"type": "image", "url": "https://пример.рф/cat.png"}])
    assert events[-1].event == "turn_completed"


def test_fetched_host() -> None:
    assert fetched_host("Example.COM") == "example.com"
    assert fetched_host("ｅｘａｍｐｌｅ.com") == "example.com"
    assert fetched_host("пример.рф") == "xn--e1afmkfd.xn--p1ai"
    assert fetched_host("a" * 64 + "é.com") is None  # a label past 63 characters


@pytest.mark.parametrize("url", FOLDED)
def test_an_embedders_turn_input_refuses_a_host_that_folds_inward(url: str) -> None:
    """The check lives in ``url_problem`` (core), so ``TurnInput`` refuses these too,
    not only the server's routes (lead, after attack10)."""
    from turnstate import ImagePart, InvalidInput, TurnInput

    with pytest.raises(InvalidInput) as refused:
        TurnInput(provider="openai", model="gpt-4o", system_prompt="",
                  content=(ImagePart(url=url),))
    assert "url" in refused.value.field
