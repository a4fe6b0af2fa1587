"""An owner's stored bytes past the store's quota (``serve --max-stored-bytes-per-owner``,
``set_storage_quota``): a turn is refused with ``409 storage_quota_exceeded`` before any
provider call and with nothing written, on both turn routes; so is a title; deleting a
chat makes room. Another owner is not affected."""

from __future__ import annotations

from tests.server.support import Api, turn_body


async def test_a_turn_past_the_quota_is_refused_before_the_provider_and_writes_nothing(
        api: Api) -> None:
    store = api.services.store
    chat = await api.new_chat()
    bob = await api.new_chat("bob")
    await api.turn(chat, text="x" * 1500)
    await api.services.engine.detached.settled()  # its event log written too
    used = await store.storage_used("alice")
    await store.set_storage_quota(used + 100)
    emulator = api.stack.emulators["openai"]
    sent = len(emulator.requests)
    answer = await api.json("POST", f"/api/chats/{chat}/turns", json=turn_body("y" * 1500),
                            status=409)
    assert answer["error"] == "storage_quota_exceeded"
    assert "delete" in answer["message"]
    ui = {"id": chat, "provider": "openai", "model": "gpt-4o", "messages": [
        {"role": "user", "parts": [{"type": "text", "text": "y" * 1500}]}]}
    answer = await api.json("POST", "/api/ui-messages", json=ui, status=409)
    assert answer["error"] == "storage_quota_exceeded"
    answer = await api.json("PATCH", f"/api/chats/{chat}", json={"title": "z" * 200},
                            status=409)
    assert answer["error"] == "storage_quota_exceeded"
    assert len(emulator.requests) == sent  # no provider call
    assert await store.storage_used("alice") == used  # nothing written
    assert len(await store.list_messages(chat)) == 2
    assert len(await store.list_turns(chat)) == 1
    assert (await api.turn(bob, "bob", text="y" * 1500))[-1].event == "turn_completed"
    assert (await api.turn(chat, text="short"))[-1].event == "turn_completed"
    await api.services.engine.detached.settled()
    assert (await api.call("DELETE", f"/api/chats/{chat}")).status == 204
    assert await store.storage_used("alice") == 0
    again = await api.new_chat()
    assert (await api.turn(again, text="y" * 300))[-1].event == "turn_completed"
