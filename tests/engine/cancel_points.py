"""The cancellation-point sweep's rig (lifecycle5): one turn, cut at every point, checked.

A ``Rig`` is a chat on a store with one committed turn behind it, an engine and a
scripted provider whose streams suspend between events (as a socket read does), and a
tool that suspends too. ``the_turn`` scripts the turn under test on one of three paths:

- ``cursor``: OpenAI (durable) continuing from the stored cursor, one tool call;
- ``replay``: OpenAI with a changed system prompt: the degradation's write, then a full
  replay, one tool call;
- ``local``: Anthropic (stateless): the local tool loop, one tool call.

The cuts (each returns whether the turn ran to its end before the cut came):

- ``cut_task``: the consumer's task cancelled at its k-th suspension (``CutAt``: the
  cancel is the task's own ``cancel()``, delivered where the k-th await suspends);
- ``cut_aclose``: ``aclose()`` of the ``run_turn`` generator at its k-th event;
- ``cut_detached``: a detached turn stopped (``TurnEngine.stop``) or its engine closed
  (``TurnEngine.aclose``) after its k-th loop step;
- ``FaultyStore``: the k-th store call raises ``StorageUnavailable``, before it is sent
  (nothing landed) or after (it landed and its reply was lost).

``check`` then proves the invariants: the turn's record ended typed, no lease held, the
chat's durable state the old one or the newly committed one (never a stateless loop's,
never half), the aborted answer's bill recorded or marked unknown, and a new turn on the
chat begins at once and completes.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, Awaitable, Coroutine, Generator
from typing import Any

import attrs

from tests.engine.support import collect, make_turn, tool
from turnstate.core._conversation import Role
from turnstate.core._envelope import Mode, parse_envelope
from turnstate.core._errors import StorageUnavailable, TurnNotFound
from turnstate.core._events import TurnEvent
from turnstate.emulators._scripted import ScriptedBackend, ScriptStep
from turnstate.engine import TurnEngine, _life_begin, _writes
from turnstate.engine._turn_input import TurnInput
from turnstate.providers._protocol import ErrorClassifier, HttpRequest
from turnstate.states._table import Trigger
from turnstate.storage import Store, TurnStatus

PATHS = ("cursor", "replay", "local")
TYPED_ENDS = frozenset(t.value for t in Trigger) | {"lease_expired", "released"}
_MODELS = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4-5"}


class SuspendingBackend(ScriptedBackend):
    """The scripted provider, suspending once before each event (a socket read), and
    the tool's two suspensions: the turn's points. With ``hold_at`` set, the turn waits
    at that point until ``release`` (a cut is made while it is held there)."""

    def __init__(self) -> None:
        super().__init__()
        self.points = 0
        self.hold_at: int | None = None
        self.reached = asyncio.Event()
        self.release = asyncio.Event()

    async def point(self) -> None:
        self.points += 1
        if self.points == self.hold_at:
            self.reached.set()
            await self.release.wait()
        else:
            await asyncio.sleep(0)

    def hold(self, k: int | None) -> None:
        self.points, self.hold_at = 0, k
        self.reached.clear()
        self.release.clear()

    async def stream(self, request: HttpRequest,  # type: ignore[override]
                     classify: ErrorClassifier) -> Any:
        async for event in super().stream(request, classify):
            await self.point()
            yield event

    async def weather(self, args: dict[str, Any]) -> Any:
        await self.point()  # a tool that awaits (its IO)
        await self.point()
        return {"city": args.get("city"), "sky": "clear"}


def provider_of(path: str) -> str:
    return "anthropic" if path == "local" else "openai"


def turn_input(backend: SuspendingBackend, path: str, text: str, *,
               turn_id: str | None = None, prompt: str = "You are terse.") -> TurnInput:
    provider = provider_of(path)
    return make_turn(text, provider=provider, model=_MODELS[provider], prompt=prompt,
                     tools=(tool("weather", backend.weather),), turn_id=turn_id)


@attrs.define
class Rig:
    store: Store
    backend: SuspendingBackend
    engine: TurnEngine
    chat_id: str
    path: str
    old_state: str | None = None
    requests_before: int = 0
    made: int = 0
    tag: str = attrs.field(factory=lambda: uuid.uuid4().hex[:12])  # unique in every store

    @property
    def turn_id(self) -> str:
        """The id of the latest turn under test (unique in every store)."""
        return f"cut-{self.tag}-{self.made}"

    def the_turn(self) -> TurnInput:
        """The turn under test (a new id each time), scripted: a tool call, then an
        answer in three deltas; the chat's state as it was before it is noted."""
        self.made += 1
        provider = provider_of(self.path)
        self.backend.scripts.pop(provider, None)
        self.backend.push(provider, ScriptStep.call(("weather", {"city": "Oslo"})),
                          ScriptStep.reply("clear skies today", chunks=3))
        self.requests_before = len(self.backend.requests)
        prompt = f"You are terse ({self.made})." if self.path == "replay" else "You are terse."
        return turn_input(self.backend, self.path, "weather in Oslo?", turn_id=self.turn_id,
                          prompt=prompt)

    async def note_state(self) -> None:
        self.old_state = (await self.store.load_chat(self.chat_id)).last_provider_state

    async def check(self, turn_id: str) -> str | None:
        """The invariants after a cut of ``turn_id``; returns how it ended (its record's
        status and reason), None when it never began."""
        store, provider = self.store, provider_of(self.path)
        chat = await store.load_chat(self.chat_id)
        assert chat.active_turn_id is None, f"{turn_id}: the chat is still held"
        try:
            record = await store.load_turn(turn_id)
        except TurnNotFound:
            assert chat.last_provider_state == self.old_state
            return None
        assert record.status in (TurnStatus.COMPLETED, TurnStatus.ABORTED), record
        state = chat.last_provider_state
        if state is not None:
            assert parse_envelope(state).mode is not Mode.STATELESS_LOOP, state
        if record.status is TurnStatus.COMPLETED:
            if provider == "openai":
                assert state is not None
                assert parse_envelope(state).cursor == self.backend.response_ids[-1]
            else:
                assert state is None
            return "completed"
        assert record.reason in TYPED_ENDS, record
        if self.path != "replay":  # a replay's degradation may clear the stored cursor
            assert state == self.old_state, (record, state, self.old_state)
        else:
            assert state in (self.old_state, None), (record, state)
        answers = [m for m in await store.list_messages(self.chat_id)
                   if m.seq == record.assistant_seq]
        assert len(answers) == 1, (record, await store.list_messages(self.chat_id))
        answer = answers[0]
        assert answer.role is Role.ASSISTANT and answer.status.value == "aborted", answer
        answered = any(r.provider == provider for r in
                       self.backend.requests[self.requests_before:])
        if answered and answer.usage is None:  # billed, or marked unknown
            assert answer.provider_state is not None and "usageMissing" in \
                answer.provider_state, (record, answer)
        return f"aborted {record.reason}"

    async def next_turn_completes(self) -> None:
        """A new turn on the chat begins at once (no lease to wait for) and commits."""
        self.backend.scripts.pop(provider_of(self.path), None)
        outcome = await collect(self.engine.run_turn(
            self.chat_id, turn_input(self.backend, self.path, "and tomorrow?")))
        assert outcome.committed, outcome.final


async def rig(store: Store, path: str, **engine_options: Any) -> Rig:
    backend = SuspendingBackend()
    engine = TurnEngine(store, backend.adapters(), backend, **engine_options)
    engine.detached.configure(flush_seconds=0)  # the log written at the next loop step
    chat = await store.create_chat(owner="alice")
    made = Rig(store=store, backend=backend, engine=engine, chat_id=chat.id, path=path)
    await made.next_turn_completes()  # a stored cursor (OpenAI) for the turn to go on from
    return made


# -- the cuts ----------------------------------------------------------------------------

class CutAt:
    """Await ``coro``, cancelling the task that awaits it at the k-th suspension (its own
    ``cancel()``: the await then suspended is cancelled, as by any other canceller)."""

    def __init__(self, coro: Coroutine[Any, Any, Any], k: int, again: int | None = None
                 ) -> None:
        self.coro, self.k, self.seen = coro, k, 0
        self.cuts = {k} if again is None else {k, k + again}

    def __await__(self) -> Generator[Any, Any, Any]:
        inner = self.coro.__await__()
        value: Any = None
        thrown: BaseException | None = None
        while True:
            try:
                yielded = inner.send(value) if thrown is None else inner.throw(thrown)
            except StopIteration as stop:
                return stop.value
            self.seen += 1
            if self.seen in self.cuts:
                task = asyncio.current_task()
                assert task is not None
                task.cancel()
            try:
                value, thrown = (yield yielded), None
            except BaseException as exc:
                value, thrown = None, exc


async def _consume(rig: Rig, turn: TurnInput) -> None:
    async for _ in rig.engine.run_turn(rig.chat_id, turn):
        pass


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


async def cut_task(rig: Rig, turn: TurnInput, k: int, again: int | None = None) -> bool:
    """Cancel the consumer's task at its k-th suspension (and ``again`` suspensions
    later); True if the turn ended first."""
    cut = CutAt(_consume(rig, turn), k, again)
    task = asyncio.create_task(_await(cut))
    await asyncio.wait([task])
    if again is not None:  # a second cancel leaves the writes it cut to finish alone
        await settled()
    if task.cancelled():
        return False
    task.result()
    return cut.seen < k


async def settled() -> None:
    """Wait for the writes a turn let go on in the background (a release, an abort)."""
    while pending := [t for t in (*_life_begin._BACKGROUND, *_writes._WRITING)
                      if not t.done()]:
        await asyncio.wait(pending)


async def cut_aclose(rig: Rig, turn: TurnInput, k: int) -> bool:
    """``aclose()`` the turn's events at its k-th event; True if it ended first."""
    return await aclose_at(rig.engine.run_turn(rig.chat_id, turn), k)


async def aclose_at(events: AsyncGenerator[TurnEvent, None], k: int) -> bool:
    """Read ``events`` and ``aclose()`` them at the k-th; True if they ended first."""
    seen = 0
    async for _ in events:
        seen += 1
        if seen == k:
            await events.aclose()
            return False
    return True


async def cut_detached(rig: Rig, turn: TurnInput, k: int, how: str) -> bool:
    """Start ``turn`` detached, hold it at its k-th point, then stop it (``stop``) or
    close the engine (``close``); True if it ended before the k-th point. Waits for its
    end and its log."""
    backend = rig.backend
    backend.hold(k)
    live = await rig.engine.start_turn(rig.chat_id, turn)
    assert live.task is not None
    reached = asyncio.ensure_future(backend.reached.wait())
    await asyncio.wait([live.task, reached], return_when=asyncio.FIRST_COMPLETED)
    reached.cancel()
    await asyncio.wait([reached])
    ended = not backend.reached.is_set()
    if how == "close":
        await rig.engine.aclose()  # its turns are ended, the held one included
    else:
        try:
            await rig.engine.stop(live.turn_id)
        except Exception:
            assert ended
    backend.release.set()
    await asyncio.wait([live.task])
    await live.logged.wait()
    backend.hold(None)
    if how == "close":  # a new engine for the next turns (the closed one takes none)
        rig.engine = TurnEngine(rig.store, rig.backend.adapters(), rig.backend)
        rig.engine.detached.configure(flush_seconds=0)
    return ended


class FaultyStore:
    """``store`` whose k-th call of a turn's method raises ``StorageUnavailable``: before
    the call is sent (``after=False``) or once it has landed (``after=True``)."""

    METHODS = frozenset({"begin_turn", "load_chat", "load_history", "record_transition",
                         "renew_lease", "commit_turn", "abort_turn", "load_turn",
                         "list_messages"})

    def __init__(self, store: Store, k: int, *, after: bool, bug: bool = False) -> None:
        self._store, self.k, self.after, self.bug = store, k, after, bug
        self.calls = 0
        self.armed = False

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._store, name)
        if name not in self.METHODS:
            return method

        async def faulty(*args: Any, **kwargs: Any) -> Any:
            if not self.armed:
                return await method(*args, **kwargs)
            self.calls += 1
            if self.calls != self.k:
                return await method(*args, **kwargs)
            if self.after:
                await method(*args, **kwargs)
            msg = f"injected: {name} (call {self.k}) {'reply lost' if self.after else 'failed'}"
            if self.bug:  # not the store's typed error: a bug in a custom store
                raise RuntimeError(msg)
            raise StorageUnavailable(msg)

        return faulty
