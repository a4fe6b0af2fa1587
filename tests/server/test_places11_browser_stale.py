"""The page never edits or deletes a message it did not show (helper "places11"): its edit
and "delete from here" send the message's etag as ``If-Match``; when another tab changed
or deleted the message since, the server's 412 makes the page read the chat again and say
so, and nothing is changed. Before, the page deleted (or overwrote) what the other tab
had put there."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.server.support import turn_body
from tests.server.test_browser import Page, browser, served  # noqa: F401
from tests.server.test_process import ServeProcess

AUTH = {"Authorization": "Bearer alice-token"}


async def _chat_of_two_turns(served: ServeProcess, browser: Any) -> tuple[Page, str]:  # noqa: F811
    tab = Page(await (await browser.new_context()).new_page())
    await tab.open(served.url, "token=alice-token")
    await tab.settings("openai", "gpt-4o")
    await tab.send("first")
    await tab.send("second")
    return tab, tab.page.url.split("chat=")[1]


def _user_text(seq: int) -> str:
    return f"#messages .msg.user[data-seq='{seq}'] .text"


async def test_a_stale_delete_is_refused_and_the_chat_reloaded(
        served: ServeProcess, browser: Any) -> None:  # noqa: F811
    tab, chat = await _chat_of_two_turns(served, browser)
    base = f"{served.url}api/chats/{chat}"
    async with aiohttp.ClientSession(headers=AUTH) as http:  # the other tab
        assert (await http.delete(f"{base}/messages/3")).status == 200
        async with http.post(f"{base}/turns", json=turn_body("third")) as turn:
            assert turn.status == 200
            await turn.read()
        await tab.page.locator(f"{_user_text(3)}", has_text="second").wait_for()
        await tab.page.click("#messages .msg.user[data-seq='3'] .delete")
        await tab.toast("Not deleted")
        await tab.page.locator(_user_text(3), has_text="third").wait_for()  # reloaded
        view = await (await http.get(base)).json()
    assert len(view["messages"]) == 4  # "third" and its answer: deleted before


async def test_a_stale_edit_is_refused_and_the_chat_reloaded(
        served: ServeProcess, browser: Any) -> None:  # noqa: F811
    tab, chat = await _chat_of_two_turns(served, browser)
    base = f"{served.url}api/chats/{chat}"
    async with aiohttp.ClientSession(headers=AUTH) as http:  # the other tab
        edited = await http.patch(f"{base}/messages/1", json={"text": "other tab's"})
        assert edited.status == 200
        await tab.page.click("#messages .msg.user[data-seq='1'] .edit")
        await tab.page.fill("#messages .msg.user[data-seq='1'] textarea", "this tab's")
        await tab.page.click("#messages .msg.user[data-seq='1'] .save")
        await tab.toast("Not edited")
        await tab.page.locator(_user_text(1), has_text="other tab's").wait_for()
        view = await (await http.get(base)).json()
    assert view["messages"][0]["parts"][0]["text"] == "other tab's"  # overwritten before
