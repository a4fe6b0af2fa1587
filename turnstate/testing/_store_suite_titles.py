"""The conformance suite's chat titles, bound and search (``Store.rename_chat``,
``chat_titles``, ``create_chat(max_chats=...)``, ``search_chats``): what the reference
server's chat list, rename and search rely on. Part of ``StoreConformance``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from turnstate.core._errors import ChatLimitReached, ChatNotFound, ConfigurationError
from turnstate.storage._protocol import ChatPosition, Store
from turnstate.testing._records import ManualClock, committed_turn


class TitleChecks:
    """``StoreConformance``'s checks of titles, the per-owner bound and search."""

    def make_store(self, clock: ManualClock) -> contextlib.AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    @contextlib.asynccontextmanager
    async def _titled_store(self) -> AsyncIterator[tuple[Store, ManualClock]]:
        clock = ManualClock()
        async with self.make_store(clock) as store:
            yield store, clock

    async def test_a_rename_sets_and_removes_a_title_without_touching_the_chat(
            self) -> None:
        async with self._titled_store() as (store, clock):
            chat = await store.create_chat(owner="alice", chat_id="c1")
            await store.create_chat(owner="alice", chat_id="c2")
            assert await store.chat_titles(["c1", "c2"], owner="alice") == {}
            clock.advance(5)
            await store.rename_chat("c1", "Trip to Lisbon ✈", owner="alice")
            assert await store.chat_titles(["c1", "c2", "nope"], owner="alice") == {
                "c1": "Trip to Lisbon ✈"}
            await store.rename_chat("c1", "Porto instead")
            assert await store.chat_titles(["c1"], owner="alice") == {"c1": "Porto instead"}
            after = await store.load_chat("c1")  # no activity: version and order stay
            assert (after.version, after.updated_at) == (chat.version, chat.updated_at), (
                "a rename changed the chat's version or updated_at")
            await store.rename_chat("c1", None, owner="alice")
            assert await store.chat_titles(["c1"], owner="alice") == {}

    async def test_titles_are_the_owner_s(self) -> None:
        async with self._titled_store() as (store, _):
            await store.create_chat(owner="alice", chat_id="c1")
            for call in (store.rename_chat("c1", "mine now", owner="bob"),
                         store.rename_chat("missing", "x", owner="alice")):
                with pytest.raises(ChatNotFound):
                    await call
            await store.rename_chat("c1", "alice's", owner="alice")
            assert await store.chat_titles(["c1"], owner="bob") == {}
            await store.delete_chat("c1", owner="alice")
            await store.create_chat(owner="alice", chat_id="c1")  # the id again: no title
            assert await store.chat_titles(["c1"], owner="alice") == {}

    async def test_max_chats_bounds_each_owner_s_chats(self) -> None:
        async with self._titled_store() as (store, _):
            for n in range(3):
                await store.create_chat(owner="alice", chat_id=f"a{n}", max_chats=3)
            with pytest.raises(ChatLimitReached):
                await store.create_chat(owner="alice", chat_id="a3", max_chats=3)
            assert len(await store.list_chats("alice")) == 3
            await store.create_chat(owner="bob", chat_id="b0", max_chats=3)
            await store.delete_chat("a0", owner="alice")
            await store.create_chat(owner="alice", chat_id="a4", max_chats=3)  # room again

    async def test_search_finds_titles_and_first_questions_a_page_at_a_time(
            self) -> None:
        async with self._titled_store() as (store, clock):
            asked = {"c1": "Weather in LISBON?", "c2": "a poem", "c3": "lisbon trams",
                     "c4": "tell me more", "c5": "nothing here"}
            for chat_id, text in asked.items():
                clock.advance(1)
                await store.create_chat(owner="alice", chat_id=chat_id)
                await committed_turn(store, chat_id, f"t-{chat_id}", text=text,
                                     reply="lisbon is in the answer only")
            clock.advance(1)
            await committed_turn(store, "c1", "t-c1b", text="and lisbon again")
            await committed_turn(store, "c4", "t-c4b", text="Lisbon, second question")
            await store.rename_chat("c2", "Lisbon poems", owner="alice")
            await store.create_chat(owner="bob", chat_id="b1")
            await committed_turn(store, "b1", "t-b1", text="lisbon")
            # c1 (first question), c2 (title), c3 (first question); not c4 (a later
            # question), c5, answers or bob's chat; newest update first.
            found = await store.search_chats("alice", "Lisbon")
            assert [chat.id for chat in found] == ["c1", "c3", "c2"], (
                "search_chats must match the title or the first user message, in "
                "list_chats' order, owner-scoped")
            first = await store.search_chats("alice", "lisbon", limit=2)
            assert [chat.id for chat in first] == ["c1", "c3"]
            rest = await store.search_chats("alice", "LISBON", limit=2,
                                            after=ChatPosition.of(first[-1]))
            assert [chat.id for chat in rest] == ["c2"]
            assert await store.search_chats("alice", "porto") == ()
            assert await store.search_chats("carol", "lisbon") == ()
            for bad in ("", "x" * 201):
                with pytest.raises(ConfigurationError):
                    await store.search_chats("alice", bad)

    async def test_search_folds_case_and_accents_the_same_way_in_every_store(
            self) -> None:
        """Unicode case folding (``ß`` is ``ss``, a final ``ς`` is ``σ``, ``İ`` is
        ``i``) and no Latin, Greek or Cyrillic accents, whatever the database's locale:
        the same query finds the same chats in every store."""
        async with self._titled_store() as (store, clock):
            asked = {"de": "Der Weg zur STRASSE in Köln", "tr": "İSTANBUL gezisi",
                     "el": "ΟΔΥΣΣΕΥΣ και Ιθάκη", "fr": "Un café crème",
                     "nfd": "Cafe\u0301 au lait", "dotless": "ılık su",
                     "lig": "the ﬁnal ﬂight", "ru": "Ёлка и ЁЖ"}
            for chat_id, text in asked.items():
                clock.advance(1)
                await store.create_chat(owner="alice", chat_id=chat_id)
                await committed_turn(store, chat_id, f"t-{chat_id}", text=text)
            await store.rename_chat("de", "Straße nach Köln", owner="alice")
            expected = {
                "straße": {"de"}, "STRASSE": {"de"}, "koln": {"de"}, "KÖLN": {"de"},
                "istanbul": {"tr"}, "İstanbul": {"tr"}, "ISTANBUL": {"tr"},
                "οδυσσευς": {"el"}, "Οδυσσεύς": {"el"}, "ιθακη": {"el"},
                "café": {"fr", "nfd"}, "CAFE": {"fr", "nfd"}, "cafe\u0301": {"fr", "nfd"},
                "creme": {"fr"}, "ılık": {"dotless"}, "ilik": set(),
                "final flight": {"lig"}, "елка": {"ru"}, "ёж": {"ru"}, "ß": {"de"},
            }
            for query, chats in expected.items():
                found = {chat.id for chat in await store.search_chats("alice", query)}
                assert found == chats, (
                    f"search_chats({query!r}) found {sorted(found)}, expected "
                    f"{sorted(chats)}: fold case (str.casefold) and accents as the "
                    "reference stores do")
