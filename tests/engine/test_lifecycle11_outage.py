"""A turn rides out a short store outage (lifecycle11): a database restart of a few
seconds loses neither the turn nor the provider's paid answer.

ops10's probe (``tests/faults/test_outage_frees_chat.py``: PostgreSQL cut for 3 s
mid-turn, a 30 s lease) ended about half its turns ``storage_failed`` with 27 s of lease
left: the history read of the replay failed once and ended the turn; a commit whose
sends failed three times in a row (the store answering reads but not writes) ended it
``commit_failed``. Here the same outage is made deterministic: a ``MemoryStore`` on the
virtual clock (``virtual_time``) behind ``Outage``, which fails every call of the store
(or only the named ones) with ``StorageUnavailable`` for 3 s from a chosen moment. The
turn completes once the store is back; an outage longer than the lease still ends it,
and a non-transient error still fails at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from tests.engine.support import Outcome, collect, make_turn, tool
from tests.engine.virtual_time import run_virtual, virtual_store
from turnstate import ImagePart, TextPart, TurnInput
from turnstate.core._errors import StorageError, StorageUnavailable
from turnstate.emulators._scripted import ScriptedBackend, ScriptStep
from turnstate.engine import TurnEngine
from turnstate.storage import MemoryStore, TurnStatus
from turnstate.storage._protocol import TurnLease

LEASE, OUTAGE = 30.0, 3.0
PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)


class Outage:
    """``store`` whose calls fail with ``error`` for ``span`` seconds of loop time from
    the ``nth`` call of ``trigger`` (that call included), or from ``begin()``; ``only``:
    the methods that fail (None: all of them, as a database away does)."""

    def __init__(self, store: MemoryStore, *, trigger: str | None = None, nth: int = 1,
                 span: float = OUTAGE, only: Iterable[str] | None = None,
                 error: Callable[[], StorageError] = lambda: StorageUnavailable("away")
                 ) -> None:
        self.store, self.trigger, self.nth, self.span = store, trigger, nth, span
        self.only = None if only is None else frozenset(only)
        self.error = error
        self.started: float | None = None
        self.seen: dict[str, int] = {}
        self.failed: list[str] = []

    def begin(self) -> None:
        self.started = asyncio.get_running_loop().time()

    def _away(self, name: str) -> bool:
        self.seen[name] = self.seen.get(name, 0) + 1
        if self.started is None and name == self.trigger and self.seen[name] == self.nth:
            self.begin()
        if self.started is None or (self.only is not None and name not in self.only):
            return False
        return asyncio.get_running_loop().time() < self.started + self.span

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.store, name)
        if name == "turn_log":  # the log's calls meet the same outage
            return _Through(found, self)
        if not callable(found) or not asyncio.iscoroutinefunction(found):
            return found

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self._away(name):
                self.failed.append(name)
                raise self.error()
            return await found(*args, **kwargs)

        return call


class _Through:
    """An object of the store (its turn log) whose calls meet ``outage`` too."""

    def __init__(self, target: Any, outage: Outage) -> None:
        self.target, self.outage = target, outage

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.target, name)
        if not callable(found) or not asyncio.iscoroutinefunction(found):
            return found

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.outage._away(name):
                self.outage.failed.append(name)
                raise self.outage.error()
            return await found(*args, **kwargs)

        return call


def _engine(outage: Outage, backend: ScriptedBackend) -> TurnEngine:
    return TurnEngine(outage, backend.adapters(), backend,  # type: ignore[arg-type]
                      lease_seconds=LEASE)


async def _replayed(**options: Any) -> tuple[Outcome, Outage, TurnStatus]:
    """A first turn (a replay: its history read) with the store away from its history
    read on."""
    store = virtual_store()
    chat = await store.create_chat(owner="alice")
    outage = Outage(store, trigger="load_history", **options)
    backend = ScriptedBackend()
    backend.push("openai", ScriptStep.reply("paid answer"))
    outcome = await collect(_engine(outage, backend).run_turn(chat.id, make_turn("q")))
    return outcome, outage, (await store.load_turn(outcome.final.turn_id)).status


def test_the_replay_read_rides_out_the_outage() -> None:
    outcome, outage, status = run_virtual(_replayed())
    assert outcome.committed, outcome.final
    assert outcome.final.text == "paid answer"  # type: ignore[union-attr]
    assert "replay" in outcome.states and status is TurnStatus.COMPLETED
    assert outage.failed.count("load_history") > 3  # retried, not three sends


def test_an_outage_past_the_lease_still_ends_the_turn_in_time() -> None:
    async def main() -> tuple[Outcome, float, TurnStatus]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        outcome, _, status = await _replayed(span=LEASE * 2, only={"load_history"})
        return outcome, loop.time() - started, status

    outcome, took, status = run_virtual(main())
    assert not outcome.committed
    assert outcome.final.reason == "storage_failed"
    # it gave up with the abort's margin left, and the abort was recorded
    assert took < LEASE and status is TurnStatus.ABORTED


def test_a_non_transient_store_error_still_fails_at_once() -> None:
    async def main() -> tuple[Outcome, Outage, TurnStatus]:
        return await _replayed(error=lambda: StorageError("corrupt row"), only={"load_history"})

    outcome, outage, status = run_virtual(main())
    assert outcome.final.reason == "storage_failed"
    assert outage.failed == ["load_history"] and status is TurnStatus.ABORTED


async def _committed(only: Iterable[str] | None) -> tuple[Outcome, Outage, TurnStatus]:
    store = virtual_store()
    chat = await store.create_chat(owner="alice")
    outage = Outage(store, trigger="commit_turn", only=only)
    backend = ScriptedBackend()
    backend.push("openai", ScriptStep.reply("paid answer"))
    outcome = await collect(_engine(outage, backend).run_turn(chat.id, make_turn("q")))
    return outcome, outage, (await store.load_turn(outcome.final.turn_id)).status


def test_the_commit_of_a_paid_answer_rides_out_a_write_outage() -> None:
    """The store answers reads but refuses writes for 3 s (a failover's read-only
    moment, contention outlasting the store's own retries): the commit was sent three
    times within milliseconds, then the paid answer was dropped (``commit_failed``)."""
    outcome, outage, status = run_virtual(_committed(only={"commit_turn"}))
    assert outcome.committed, outcome.final
    assert status is TurnStatus.COMPLETED and outage.failed.count("commit_turn") > 3


def test_the_commit_rides_out_a_whole_outage() -> None:
    outcome, _, status = run_virtual(_committed(only=None))
    assert outcome.committed, outcome.final
    assert status is TurnStatus.COMPLETED


def test_a_tool_iteration_rides_out_the_outage() -> None:
    """The store goes away while a tool runs: the local loop's next request reads the
    question's image back (let go once the first request was built) and the heartbeat
    renews meanwhile; both wait for the store, and the turn completes."""
    async def main() -> tuple[Outcome, Outage, TurnStatus]:
        store = virtual_store()
        chat = await store.create_chat(owner="alice")
        outage = Outage(store)

        async def slow(_: dict[str, Any]) -> Any:
            outage.begin()  # the database restarts while the tool runs
            await asyncio.sleep(0.5)
            return "noon"

        backend = ScriptedBackend()
        backend.push("anthropic", ScriptStep.call(("clock", {"city": "x"})),
                     ScriptStep.reply("it is noon"))
        turn = TurnInput(provider="anthropic", model="claude-sonnet-4-5", system_prompt="",
                         tools=(tool("clock", slow),),
                         content=(TextPart(text="what time is it here?"),
                                  ImagePart(media_type="image/png", data=PNG)))
        outcome = await collect(_engine(outage, backend).run_turn(chat.id, turn))
        return outcome, outage, (await store.load_turn(outcome.final.turn_id)).status

    outcome, outage, status = run_virtual(main())
    assert outcome.committed, outcome.final
    assert outcome.final.text == "it is noon"  # type: ignore[union-attr]
    assert "load_media_part" in outage.failed and status is TurnStatus.COMPLETED


class HandsNoChat(Outage):
    """A store whose begin hands no chat over (a custom store): the engine reads it."""

    async def begin_turn(self, *args: Any, **kwargs: Any) -> TurnLease:
        lease: TurnLease = await self.__getattr__("begin_turn")(*args, **kwargs)
        return attrs.evolve(lease, chat=None)


def test_the_chat_read_after_the_begin_rides_out_the_outage() -> None:
    """The engine reads the chat right after the begin: the store away then, the read
    waits for it, and the turn completes."""
    async def main() -> tuple[Outcome, Outage]:
        store = virtual_store()
        chat = await store.create_chat(owner="alice")
        outage = HandsNoChat(store, trigger="load_chat")
        backend = ScriptedBackend()
        backend.push("openai", ScriptStep.reply("paid answer"))
        return await collect(_engine(outage, backend).run_turn(chat.id, make_turn("q"))), outage

    outcome, outage = run_virtual(main())
    assert outcome.committed, outcome.final
    assert outage.failed.count("load_chat") > 3
