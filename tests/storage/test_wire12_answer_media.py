"""wire12: an answer's generated image is stored with the assistant message on every
backend: read back whole, served alone (``load_media_part``), listed lean as a
``MediaRef``, and its bytes kept apart from the parts column as a question's are."""

from __future__ import annotations

import attrs

from tests.storage.support import Backend, commit, start
from turnstate.core import ImagePart, MediaRef, ReasoningPart, TextPart
from turnstate.core._media_tokens import media_tokens
from turnstate.storage import SqliteStore

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + (64).to_bytes(4, "big") \
    + (48).to_bytes(4, "big") + b"\x08\x02\x00\x00\x00" + bytes(70_000)
IMAGE = ImagePart(media_type="image/png", data=PNG)
ANSWER = (TextPart(text="Here it is:"), IMAGE,
          ReasoningPart(provider="gemini", model="gemini-2.5-flash", kind="text_signature",
                        signature="c2ln"))


async def test_an_answer_image_round_trips_on_every_backend(backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", attrs.evolve(start("t1"), provider="gemini",
                                                      model="gemini-2.5-flash"))
    await store.commit_turn(lease, commit("v1_1", parts=ANSWER))
    history = await store.load_history("c1")
    assert [m.parts for m in history][1] == ANSWER
    answer = history[1]
    assert await store.load_media_part("c1", answer.seq, 1, owner="alice") == IMAGE
    assert await store.load_media_part("c1", answer.seq, 0, owner="alice") is None
    lean = (await store.list_messages_lean("c1"))[1]
    assert lean.parts[1] == MediaRef(kind="image", media_type="image/png", size=len(PNG),
                                     tokens=media_tokens(IMAGE))
    if isinstance(store, SqliteStore):  # the bytes apart, as a question's (version 12)
        rows = await backend.raw_rows("messages")
        stored = next(r["parts"] for r in rows if r["seq"] == answer.seq)
        assert '"media":1' in stored and len(stored) < 1_000
        blobs = await backend.raw_rows("message_media")
        assert [(b["seq"], len(b["data"])) for b in blobs] == [(answer.seq, len(PNG))]
