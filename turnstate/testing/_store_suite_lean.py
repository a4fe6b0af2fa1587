"""The conformance suite's lean reads (``Store.load_messages_lean``, ``list_messages_lean``):
every store gives the same view of a message's media without its bytes, and refuses to
write a ``MediaRef`` back. Part of ``StoreConformance``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest

from turnstate.core._conversation import Message, TextPart
from turnstate.core._errors import (
    ChatNotFound,
    ConfigurationError,
    LeanPartRefused,
    MessageNotFound,
)
from turnstate.core._media import FilePart, ImagePart, MediaRef
from turnstate.core._media_tokens import media_tokens
from turnstate.storage._lean import lean_message
from turnstate.storage._lean_message import LeanMessage
from turnstate.storage._protocol import Store, TurnAbort
from turnstate.testing._records import ManualClock, commit, committed_turn, start

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + (640).to_bytes(4, "big") \
    + (480).to_bytes(4, "big") + b"\x08\x02\x00\x00\x00"
MEDIA = (ImagePart(media_type="image/png", data=PNG + bytes(range(256)) * 64,
                   filename="a.png"),
         ImagePart(media_type="image/png", data=PNG + b"\x01"),  # base64 padded "=="
         ImagePart(media_type="image/gif", data=b"GIF89a" + b"\x02" * 4),  # padded "="
         ImagePart(url="https://example.com/cat.jpg", filename="cat.jpg"),
         FilePart(data=b"%PDF-1.4 /Type /Page /Type /Page", filename="r\u00e9sum\u00e9.pdf"),
         FilePart(url="https://example.com/paper.pdf"))
"""Inline images of every base64 padding, a URL image, an inline and a URL PDF."""


def same_but_media(lean: LeanMessage, full: Message) -> None:
    """``lean`` is ``full`` read lean: every field equal, each media part its
    ``MediaRef`` (kind, media type, byte size, stored token estimate, url, filename)."""
    assert lean == lean_message(full)
    for part, ref in zip(full.parts, lean.parts, strict=True):
        if isinstance(part, ImagePart | FilePart):
            assert isinstance(ref, MediaRef)
            assert (ref.media_type, ref.size, ref.tokens, ref.url, ref.filename) == (
                part.media_type, None if part.data is None else len(part.data),
                media_tokens(part), part.url, part.filename)


class LeanReads:
    """``StoreConformance``'s checks of the lean reads."""

    def make_store(self, clock: ManualClock) -> contextlib.AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    @contextlib.asynccontextmanager
    async def _lean_store(self) -> AsyncIterator[Store]:
        async with self.make_store(ManualClock()) as store:
            yield store

    async def test_a_lean_read_gives_media_without_its_bytes(self) -> None:
        """``load_messages_lean`` and ``list_messages_lean`` read what their full reads
        read, each image and file a ``MediaRef`` of its size and stored tokens."""
        parts = (TextPart(text="look"), *MEDIA)
        async with self._lean_store() as store:
            await store.create_chat(owner="alice", chat_id="c1")
            await committed_turn(store, "c1", "t1", text="first")
            lease = await store.begin_turn("c1", attrs.evolve(start("t2"), user_parts=parts))
            await store.commit_turn(lease, commit("resp_2"))
            await store.begin_turn("c1", start("t3"))  # an in-progress turn is listed too
            full = await store.list_messages("c1")
            listed = await store.list_messages_lean("c1", owner="alice")
            assert len(listed) == len(full) == 6
            for lean, message in zip(listed, full, strict=True):
                same_but_media(lean, message)
            assert listed[2].text() == "look"
            windows: list[dict[str, Any]] = [{"limit": 3}, {"limit": 2, "before_seq": 4},
                                             {"limit": 4, "after_seq": 1},
                                             {"limit": 9, "after_seq": 0}]
            for window_args in windows:
                window = await store.load_messages("c1", **window_args)
                read = await store.load_messages_lean("c1", owner="alice", **window_args)
                assert (read.more, read.total, set(read.turns)) == (
                    window.more, window.total, set(window.turns)), window_args
                assert len(read.messages) == len(window.messages)
                for lean_one, message in zip(read.messages, window.messages, strict=True):
                    same_but_media(lean_one, message)
            assert await store.list_messages_lean("c1") == await store.list_messages_lean(
                "c1", owner="alice")

    async def test_a_lean_read_checks_what_the_full_read_checks(self) -> None:
        async with self._lean_store() as store:
            await store.create_chat(owner="alice", chat_id="c1")
            assert await store.list_messages_lean("c1") == ()
            empty = await store.load_messages_lean("c1", limit=3)
            assert (empty.messages, empty.more, empty.total) == ((), False, 0)
            for call in (store.load_messages_lean("c1", limit=1, owner="bob"),
                         store.load_messages_lean("nope", limit=1),
                         store.list_messages_lean("c1", owner="bob"),
                         store.list_messages_lean("nope")):
                with pytest.raises(ChatNotFound):
                    await call
            for bad in (store.load_messages_lean("c1", limit=0),
                        store.load_messages_lean("c1", limit=1, before_seq=3, after_seq=1)):
                with pytest.raises(ConfigurationError):
                    await bad

    async def test_a_lean_part_is_never_written(self) -> None:
        """A ``MediaRef`` handed to any write (a turn's user parts, its commit or abort,
        an edit) is refused with ``LeanPartRefused`` and nothing changes."""
        async with self._lean_store() as store:
            await store.create_chat(owner="alice", chat_id="c1")
            lease = await store.begin_turn("c1", attrs.evolve(start("t1"),
                                                              user_parts=MEDIA[:1]))
            await store.commit_turn(lease, commit("resp_1"))
            before = (await store.load_chat("c1"), await store.list_messages("c1"))
            ref = (await store.list_messages_lean("c1"))[0].parts[0]
            assert isinstance(ref, MediaRef)
            with pytest.raises(LeanPartRefused):
                await store.begin_turn("c1", attrs.evolve(start("t2"), user_parts=(ref,)))
            with pytest.raises(LeanPartRefused):
                await store.edit_message("c1", 1, (ref,))  # type: ignore[arg-type]
            assert (await store.load_chat("c1"), await store.list_messages("c1")) == before
            lease = await store.begin_turn("c1", start("t3"))
            taken = await store.list_messages("c1")
            with pytest.raises(LeanPartRefused):
                await store.commit_turn(lease, commit("resp_3", parts=(ref,)))  # type: ignore[arg-type]
            with pytest.raises(LeanPartRefused):
                await store.abort_turn(lease, TurnAbort(reason="x", parts=(ref,)))
            assert await store.list_messages("c1") == taken
            await store.abort_turn(lease, TurnAbort(reason="cancelled"))  # the lease holds

    async def test_a_media_part_is_read_alone(self) -> None:
        """``load_media_part`` gives the one image or file the full read gives at that
        index, with its bytes (after an edit too); None for another part or an index
        past the message's; the owner and the message are checked."""
        parts = (TextPart(text="look"), *MEDIA)
        async with self._lean_store() as store:
            await store.create_chat(owner="alice", chat_id="c1")
            lease = await store.begin_turn("c1", attrs.evolve(start("t1"), user_parts=parts))
            await store.commit_turn(lease, commit("resp_1"))
            (question, _) = await store.list_messages("c1")
            for index, part in enumerate(question.parts):
                read = await store.load_media_part("c1", 1, index, owner="alice")
                assert read == (part if isinstance(part, ImagePart | FilePart) else None)
            assert await store.load_media_part("c1", 2, 0) is None  # the answer's text
            assert await store.load_media_part("c1", 1, len(parts)) is None
            await store.edit_message("c1", 1, (MEDIA[4], TextPart(text="now")))
            assert await store.load_media_part("c1", 1, 0) == MEDIA[4]
            assert await store.load_media_part("c1", 1, 1) is None
            for missing, error in ((store.load_media_part("c1", 1, 0, owner="bob"),
                                    ChatNotFound),
                                   (store.load_media_part("nope", 1, 0), ChatNotFound),
                                   (store.load_media_part("c1", 3, 0), MessageNotFound),
                                   (store.load_media_part("c1", 2**70, 0), MessageNotFound),
                                   (store.load_media_part("c1", 1, -1), ConfigurationError)):
                with pytest.raises(error):
                    await missing
