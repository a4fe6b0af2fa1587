"""The conformance suite's checks of edits: an edit holds only media a new question
could (``check_edit_parts``: https URLs of public hosts, inline bytes of the type they
say), refused ``InvalidInput`` before anything is written (stored, such a part failed
every later replay of the chat with the provider's 400, or was sent as its omitted text);
and an edit or a delete from a seq that names the message it read there (``expect``, an
``ExpectedMessage``) writes nothing once another message, or another version of it, is
there (``MessageChanged``), even on a clock that did not move (each edit's stamp is later
than the message's last change). Part of ``StoreConformance``."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from turnstate.core._conversation import Part, TextPart
from turnstate.core._errors import InvalidInput, MessageChanged
from turnstate.core._media import FilePart, ImagePart
from turnstate.storage._expected import ExpectedMessage
from turnstate.storage._protocol import Store
from turnstate.testing._records import ManualClock, committed_turn

_PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(13)
REFUSED_EDITS: tuple[tuple[Part, str], ...] = (
    (ImagePart(url="http://example.com/cat.png"), "parts[1].url"),
    (ImagePart(url="https://10.0.0.7/cat.png"), "parts[1].url"),
    (ImagePart(url="https://[::1]/cat.png"), "parts[1].url"),
    (ImagePart(media_type="image/png", data=b"not a png at all"), "parts[1].data"),
    (ImagePart(media_type="image/jpeg", data=_PNG), "parts[1].media_type"),
    (FilePart(data=b"hello, not a PDF"), "parts[1].data"),
    (FilePart(media_type="text/plain", data=b"notes"), "parts[1].media_type"),
    (ImagePart(url="data:image/png;base64," + base64.b64encode(b"not a png").decode()),
     "parts[1].data"),
)
"""Media ``TurnInput`` refuses, each with the field an edit's refusal names."""


class EditChecks:
    """``StoreConformance``'s check of the parts an edit writes."""

    def make_store(self, clock: ManualClock) -> contextlib.AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    @contextlib.asynccontextmanager
    async def _edit_store(self) -> AsyncIterator[Store]:
        async with self.make_store(ManualClock()) as store:
            yield store

    async def test_an_edit_with_media_a_question_could_not_hold_writes_nothing(
            self) -> None:
        async with self._edit_store() as store:
            await store.create_chat(owner="alice", chat_id="c1")
            await committed_turn(store, "c1", "t1", cursor="resp_1")
            before = await store.load_chat("c1")
            for part, field in REFUSED_EDITS:
                with pytest.raises(InvalidInput) as refused:
                    await store.edit_message("c1", 1, (TextPart(text="edited"), part))
                assert refused.value.field == field, (part, refused.value)
            after = await store.load_chat("c1")
            assert (after.version, after.last_provider_state) == (
                before.version, before.last_provider_state)  # the cursor is kept
            assert (await store.load_history("c1"))[0].parts == (TextPart(text="hello"),)
            good = (TextPart(text="edited"), ImagePart(media_type="image/png", data=_PNG),
                    ImagePart(url="https://example.com/cat.png"))
            await store.edit_message("c1", 1, good)
            assert (await store.load_history("c1"))[0].parts == good

    async def test_a_change_expecting_a_message_since_changed_writes_nothing(
            self) -> None:
        async with self._edit_store() as store:  # the manual clock does not move
            await store.create_chat(owner="alice", chat_id="c1")
            await committed_turn(store, "c1", "t1")
            read = (await store.load_history("c1"))[0]
            await store.edit_message("c1", 1, (TextPart(text="another tab's"),))
            edited = (await store.load_history("c1"))[0]
            assert edited.updated_at > read.updated_at  # told apart on a still clock
            stale = ExpectedMessage.of(read)
            with pytest.raises(MessageChanged):
                await store.edit_message("c1", 1, (TextPart(text="stale"),), expect=stale)
            with pytest.raises(MessageChanged):
                await store.delete_messages_from("c1", 1, expect=stale)
            assert (await store.load_history("c1"))[0].text() == "another tab's"
            await store.edit_message("c1", 1, (TextPart(text="now"),),
                                     expect=ExpectedMessage.of(edited))
            assert (await store.load_history("c1"))[0].text() == "now"
