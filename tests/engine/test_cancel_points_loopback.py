"""The cancellation-point sweep against the emulators over loopback HTTP (lifecycle5).

``test_cancel_points`` cuts turns of the in-process scripted provider; here the turn is
real HTTP to the OpenAI Responses emulator (cursor and replay paths) and the Anthropic
emulator (local tool loop), through the aiohttp transport: a cut may land in a socket
read, in the transport's pool or in the SSE parser. After each cut (the consumer's task
cancelled at its k-th suspension, or ``aclose()`` at its k-th event): the chat is free,
the turn ended typed, the durable state the old or the newly committed one (never a
stateless loop's), a request the emulator received is billed or marked unknown on the
aborted answer, no task is left, and a new turn on the chat commits.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import attrs
import pytest

from tests.engine.cancel_points import TYPED_ENDS, CutAt, aclose_at, settled
from tests.engine.support import collect, make_turn, tool
from turnstate.core._envelope import Mode, parse_envelope
from turnstate.core._errors import TurnNotFound
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine
from turnstate.providers import RetryPolicy
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore, TurnStatus, decode_audit

MAX_K = 400
MODELS = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4-5"}
ASK = '[[call:weather {"city": "Oslo"}]] weather in Oslo?'


@attrs.define
class Loop:
    providers: EmulatedProviders
    transport: AiohttpTransport
    engine: TurnEngine
    store: MemoryStore
    chat_id: str
    path: str
    made: int = 0
    old_state: str | None = None
    received: int = 0

    @property
    def provider(self) -> str:
        return "anthropic" if self.path == "local" else "openai"

    @property
    def turn_id(self) -> str:
        return f"loop-{id(self):x}-{self.made}"

    def turn(self, text: str = ASK, *, cut: bool = True) -> Any:
        if cut:
            self.made += 1
        prompt = f"You are terse ({self.made})." if self.path == "replay" else "Be terse."
        return make_turn(text, provider=self.provider, model=MODELS[self.provider],
                         prompt=prompt, tools=(tool("weather"),),
                         turn_id=self.turn_id if cut else None)

    async def before(self) -> None:
        self.old_state = (await self.store.load_chat(self.chat_id)).last_provider_state
        self.received = len(self.providers.emulators[self.provider].requests)

    async def check(self) -> str:
        chat = await self.store.load_chat(self.chat_id)
        assert chat.active_turn_id is None, "the chat is still held"
        try:
            record = await self.store.load_turn(self.turn_id)
        except TurnNotFound:
            assert chat.last_provider_state == self.old_state
            return "never began"
        state = chat.last_provider_state
        if state is not None:
            assert parse_envelope(state).mode is not Mode.STATELESS_LOOP, state
        answer = next(m for m in await self.store.list_messages(self.chat_id)
                      if m.seq == record.assistant_seq)
        if record.status is TurnStatus.COMPLETED:
            if self.provider == "openai":  # the cursor the answer's audit names
                assert answer.provider_state is not None and state is not None
                assert parse_envelope(state).cursor == decode_audit(
                    answer.provider_state).cursor
            else:
                assert state is None
            return "completed"
        assert record.status is TurnStatus.ABORTED and record.reason in TYPED_ENDS, record
        assert state == self.old_state or (self.path == "replay" and state is None), state
        sent = len(self.providers.emulators[self.provider].requests) > self.received
        if sent and answer.usage is None:  # billed, or marked unknown
            assert answer.provider_state is not None, (record, answer)
            assert "usageMissing" in answer.provider_state, (record, answer)
        return f"aborted {record.reason}"


@pytest.fixture(params=["cursor", "replay", "local"])
async def loop(request: pytest.FixtureRequest) -> AsyncIterator[Loop]:
    async with EmulatedProviders(["openai", "anthropic"]) as providers, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport:
        store = MemoryStore()
        engine = TurnEngine(store, providers.adapters, transport)
        chat = await store.create_chat(owner="alice")
        made = Loop(providers, transport, engine, store, chat.id, str(request.param))
        assert (await collect(engine.run_turn(chat.id, made.turn("hi", cut=False)))).committed
        yield made


async def _sweep(made: Loop, cut: Callable[[Loop, int], Awaitable[bool]]) -> list[str]:
    before = asyncio.all_tasks()
    endings = []
    for k in range(1, MAX_K):
        await made.before()
        ended = await cut(made, k)
        endings.append(await made.check())
        outcome = await collect(made.engine.run_turn(made.chat_id, made.turn("and?", cut=False)))
        assert outcome.committed, outcome.final
        left = {t for t in asyncio.all_tasks() - before - {asyncio.current_task()}
                if not _serving(t)}
        assert not left, f"k={k}: tasks left: {left}"
        session = made.transport._session
        if session is not None:  # no request holds a connection once the turn is over
            assert not session.connector._acquired, session.connector._acquired  # type: ignore[union-attr]
        if ended:
            break
    else:
        pytest.fail("the turn never ran to its end")
    assert endings[-1] == "completed" and "aborted cancelled" in endings, endings
    return endings


def _serving(task: asyncio.Task[Any]) -> bool:
    """An emulator's own task serving a connection a cut client left (the server's
    side: it ends at its keep-alive timeout or when the client's socket closes)."""
    return task.get_coro().__qualname__ == "RequestHandler.start"  # type: ignore[union-attr]


async def _consume(made: Loop) -> None:
    async for _ in made.engine.run_turn(made.chat_id, made.turn()):
        pass


async def _await(cut: CutAt) -> None:
    await cut


async def _cancel_at(made: Loop, k: int) -> bool:
    cut = CutAt(_consume(made), k)
    task = asyncio.create_task(_await(cut))
    await asyncio.wait([task])
    await settled()
    if task.cancelled():
        return False
    task.result()
    return cut.seen < k


async def _aclose_at(made: Loop, k: int) -> bool:
    return await aclose_at(made.engine.run_turn(made.chat_id, made.turn()), k)


async def test_a_loopback_turn_cancelled_at_every_suspension(loop: Loop) -> None:
    await _sweep(loop, _cancel_at)


async def test_a_loopback_turn_closed_at_every_event(loop: Loop) -> None:
    await _sweep(loop, _aclose_at)
