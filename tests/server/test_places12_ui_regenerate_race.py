"""An AI SDK regenerate never asks a question another tab edited after it was compared
(helper "places12").

``POST /api/ui-messages`` ``regenerate-message`` compares the tab's copy of the question
with the stored one (edits10), then the turn's begin cuts it: another tab's edit between
the two was cut unseen and the old words asked. The begin now expects the question it
compared (``CutExpected``): ``409 message_changed``, nothing asked or cut. The edit lands
from a hook on the store's begin, on every store.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.support import Api
from tests.server.test_idem9_idempotency import _sent, kapi
from tests.server.test_idem9_ui_ids import _question, _submit
from tests.server.test_ui_edit import _history, _texts
from turnstate.core import TextPart

__all__ = ["kapi"]


async def test_a_regenerate_whose_question_was_edited_before_its_begin_is_409(
        kapi: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    api = kapi
    chat = await api.new_chat()
    sent = [_question("msg-aaaa", "hello")]
    assert (await _submit(api, chat, sent))[0] == 200
    history = await _history(api, chat)
    store = api.services.store
    begin, edit = store.begin_turn, store.edit_message

    async def edited_first(*args: Any, **kwargs: Any) -> Any:  # the other tab's edit
        await edit(chat, 1, (TextPart(text="other tab's"),), owner="alice")
        return await begin(*args, **kwargs)

    monkeypatch.setattr(store, "begin_turn", edited_first)
    asked = _sent(api)
    status, _, body = await _submit(api, chat, sent, trigger="regenerate-message")
    monkeypatch.undo()
    assert status == 409, body  # 200 before: "other tab's" cut, "hello" asked again
    assert "message_changed" in body
    assert _sent(api) == asked
    assert _texts(await _history(api, chat)) == ["other tab's", _texts(history)[1]]
