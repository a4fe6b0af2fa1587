"""Two AI SDK tabs on one chat, every short sequence of their moves (helper "edits10").

Each tab keeps its own copy of the chat as ``useChat`` does (its own sends, and what it
read), and submits, edits its first question, regenerates its last answer, retries its
last request or reloads; every ordered pair of moves by either tab runs on a fresh chat
(SQLite). After each move: no 5xx, every refusal typed; a retried submit or edit asks
nothing; a refused move changed nothing; the chat stays question, answer, question...; a
regenerate asked again the question the tab saw, and an edit kept what came before it.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import attrs

from tests.server.support import Api
from tests.server.test_idem9_idempotency import _sent
from tests.server.test_idem9_ui_ids import _question
from tests.server.test_ui_edit import _history, _texts

MOVES = ("submit", "edit", "regenerate", "retry", "reload")


@attrs.define
class Tab:
    name: str
    view: list[dict[str, Any]]
    last: tuple[str, dict[str, Any]] | None = None  # the move and body it sent last
    count: int = 0


def _answer(body: str) -> dict[str, Any]:
    chunks = [json.loads(line[len("data: "):]) for line in body.splitlines()
              if line.startswith("data: {")]
    start = next(c for c in chunks if c.get("type") == "start")
    text = "".join(c.get("delta", "") for c in chunks if c.get("type") == "text-delta")
    return {"id": start["messageId"], "role": "assistant",
            "parts": [{"type": "text", "text": text}]}


def _body(chat: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"id": chat, "messages": messages, "trigger": "submit-message",
            "provider": "openai", "model": "gpt-4o", **extra}


def _request(tab: Tab, chat: str, move: str) -> tuple[dict[str, Any], Any] | None:
    """The body the move sends and what the tab holds after a 200 (a function of the
    answer), or None when the tab cannot make it."""
    view = tab.view
    if move == "submit":
        tab.count += 1
        sent = _question(f"{tab.name}-{tab.count}", f"{tab.name} asks {tab.count}")
        return _body(chat, [*view, sent]), lambda a: [*view, sent, a]
    if move == "edit":
        at = next((i for i, m in enumerate(view) if m["role"] == "user"), None)
        if at is None:
            return None
        tab.count += 1
        sent = _question(view[at]["id"], f"{tab.name} edits {tab.count}")
        return (_body(chat, [*view[:at], sent], messageId=sent["id"]),
                lambda a: [*view[:at], sent, a])
    at = max((i for i, m in enumerate(view) if m["role"] == "assistant"), default=None)
    if at is None:
        return None
    return (_body(chat, view[:at], trigger="regenerate-message",
                  messageId=view[at]["id"]), lambda a: [*view[:at], a])


async def _move(api: Api, chat: str, tab: Tab, move: str) -> None:
    before, sent_before = _texts(await _history(api, chat)), _sent(api)
    if move == "reload":
        tab.view = await _history(api, chat)
        return
    if move == "retry":
        if tab.last is None:
            return
        kind, body = tab.last
        after = None
    else:
        made = _request(tab, chat, move)
        if made is None:
            return
        body, after = made
        kind = move
        tab.last = (move, body)
    response = await api.call("POST", "/api/ui-messages", json=body)
    text = await response.text()
    assert response.status < 500, text
    history = await _history(api, chat)
    texts = _texts(history)
    assert [m["role"] for m in history] == ["user", "assistant"] * (len(history) // 2)
    if response.status != 200:
        assert "error" in json.loads(text), text  # typed
        assert texts == before and _sent(api) == sent_before, (move, text)
        return
    asked = _texts([[m for m in body["messages"] if m["role"] == "user"][-1]])[0]
    if move == "retry" and kind != "regenerate" and asked in before:
        assert _sent(api) == sent_before, (kind, body)  # answered, never asked again
        return
    sent = _texts(body["messages"])
    if kind == "regenerate" or body.get("messageId") is not None:  # in its place
        assert texts[:len(sent)] == sent and len(texts) == len(sent) + 1, (texts, sent)
    else:  # a submit: asked last
        assert texts[-2] == asked, (texts, asked)
    if after is not None:
        tab.view = after(_answer(text))


async def test_every_pair_of_two_tabs_moves(api: Api) -> None:
    steps = list(itertools.product(("a", "b"), MOVES))
    for first, second in itertools.product(steps, repeat=2):
        chat = await api.new_chat()
        a = Tab("a", [])
        await _move(api, chat, a, "submit")
        tabs = {"a": a, "b": Tab("b", await _history(api, chat))}
        for name, move in (first, second):
            await _move(api, chat, tabs[name], move)
