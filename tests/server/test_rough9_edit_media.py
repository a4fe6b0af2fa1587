"""``PATCH /api/chats/{id}/messages/{seq}`` writes only media a new question could hold
(rough9): the route keeps the message's images and files, and one stored before the
checks (an http URL, bytes that are not their type: a store's ``begin_turn`` takes a
question as given) was written back with the edit, failing every later replay. The
store refuses the edit (``InvalidInput``): a 400 naming the part, nothing written."""

from __future__ import annotations

from tests.server.support import Api
from turnstate.core._conversation import TextPart
from turnstate.core._media import ImagePart
from turnstate.storage import TurnStart
from turnstate.testing._records import commit


async def test_an_edit_keeping_a_part_no_question_could_hold_is_a_400(api: Api) -> None:
    store = api.services.store
    chat = await api.new_chat()
    bad = ImagePart(url="http://169.254.169.254/latest/meta-data.png")
    lease = await store.begin_turn(chat, TurnStart(
        turn_id="t1", user_parts=(TextPart(text="look"), bad), provider="openai",
        model="gpt-4o", lease_seconds=60))
    await store.commit_turn(lease, commit(None, parts=(TextPart(text="a picture"),)))
    version = (await store.load_chat(chat)).version
    refused = await api.json("PATCH", f"/api/chats/{chat}/messages/1", status=400,
                             json={"text": "look again"})
    assert (refused["error"], refused["field"]) == ("invalid_field", "parts[1].url")
    assert "https" in refused["message"]
    message = (await store.list_messages(chat))[0]
    assert (message.text(), (await store.load_chat(chat)).version) == ("look", version)
