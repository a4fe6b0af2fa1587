"""The page's Regenerate, Retry and "Save & regenerate" name the question they ask again
(helper "places12"): they send its etag as ``If-Match``; when another tab regenerated,
edited or deleted it since, the server's 412 makes the page say so and read the chat
again, and nothing is asked or deleted. Before, the page deleted what the other tab had
put there and asked the question again."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.server.support import turn_body
from tests.server.test_browser import browser, served  # noqa: F401
from tests.server.test_places11_browser_stale import AUTH, _chat_of_two_turns, _user_text
from tests.server.test_process import ServeProcess


async def test_a_stale_regenerate_is_refused_and_the_chat_reloaded(
        served: ServeProcess, browser: Any) -> None:  # noqa: F811
    tab, chat = await _chat_of_two_turns(served, browser)
    base = f"{served.url}api/chats/{chat}"
    async with aiohttp.ClientSession(headers=AUTH) as http:  # the other tab regenerates
        async with http.post(f"{base}/turns", json={**turn_body("second, again"),
                                                    "replace_from": 3}) as turn:
            assert turn.status == 200
            await turn.read()
        other = await (await http.get(base)).json()
        await tab.page.locator(_user_text(3), has_text="second").wait_for()
        await tab.page.click("#messages .msg.assistant[data-seq='4'] .regenerate")
        await tab.toast("Not regenerated")
        await tab.page.locator(_user_text(3), has_text="second, again").wait_for()  # reloaded
        view = await (await http.get(base)).json()
    assert [m["id"] for m in view["messages"]] == [m["id"] for m in other["messages"]]


async def test_a_stale_save_and_regenerate_is_refused(
        served: ServeProcess, browser: Any) -> None:  # noqa: F811
    tab, chat = await _chat_of_two_turns(served, browser)
    base = f"{served.url}api/chats/{chat}"
    async with aiohttp.ClientSession(headers=AUTH) as http:  # the other tab edits it
        assert (await http.patch(f"{base}/messages/3", json={"text": "other tab's"})).status \
            == 200
        await tab.page.click("#messages .msg.user[data-seq='3'] .edit")
        await tab.page.fill("#messages .msg.user[data-seq='3'] textarea", "this tab's")
        await tab.page.click("#messages .msg.user[data-seq='3'] .save-regenerate")
        await tab.toast("Not regenerated")
        await tab.page.locator(_user_text(3), has_text="other tab's").wait_for()
        view = await (await http.get(base)).json()
    assert len(view["messages"]) == 4
    assert view["messages"][2]["parts"][0]["text"] == "other tab's"  # replaced before
