"""A turn's cost agrees everywhere, on every store (money4): the live final event, the
stream resumed from the turn log (twice: a replay bills nothing again), the stored
answer's usage and audit, and the chat's total (``chat_cost``), with one-hour cache
writes (``adaptive`` in a chat answered every ten minutes) kept apart in the usage."""

from __future__ import annotations

import json

from tests.engine.support import collect, make_turn
from tests.storage.support import Backend
from turnstate.core import CachePolicy, TurnCompleted
from turnstate.core._bill import chat_cost, message_cost
from turnstate.core._context import ContextSettings
from turnstate.core._cost import usd_text
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine
from turnstate.providers._transport import AiohttpTransport

SYSTEM = "".join(f"Rule {n}: answer plainly and keep the user's units. " for n in range(120))
ADAPTIVE = ContextSettings(cache=CachePolicy.ADAPTIVE)


async def test_stored_streamed_resumed_and_chat_costs_agree(backend: Backend) -> None:
    store = backend.store
    async with EmulatedProviders(["anthropic"]) as providers, \
            AiohttpTransport() as transport:
        engine = TurnEngine(store, providers.adapters, transport, clock=backend.clock)
        chat = await store.create_chat(owner="alice")
        finals = []
        for turn in range(1, 4):
            if turn > 1:
                backend.clock.advance(600)
                providers.emulators["anthropic"].cache.advance(600)  # type: ignore[attr-defined]
            question = make_turn(f"Turn {turn}: " + "the plan in detail " * 40,
                                 provider="anthropic", model="claude-sonnet-4-5",
                                 prompt=SYSTEM, context=ADAPTIVE)
            if turn < 3:
                final = (await collect(engine.run_turn(chat.id, question))).events[-1]
            else:  # detached, then resumed from its log twice
                live = await engine.start_turn(chat.id, question)
                replays = []
                for _ in range(2):
                    following = await engine.follow(chat.id, live.turn_id)
                    replays.append([entry async for entry in following.events][-1])
                assert replays[0].data == replays[1].data
                assert replays[0].type == "turn_completed"
                resumed = json.loads(replays[0].data)["stats"]
                final = None
            if final is not None:
                assert isinstance(final, TurnCompleted), final
                finals.append(final.stats)
        await engine.aclose()  # the detached turn's log writes end before the store
        messages = await store.list_messages(chat.id)
        answers = [m for m in messages if m.role == "assistant"]
        assert len(answers) == 3
        for answer, live_stats in zip(answers, finals, strict=False):
            assert answer.usage == live_stats.usage
            assert message_cost(answer) == live_stats.cost
        assert answers[1].usage is not None and answers[1].usage.cache_write_1h_tokens > 0
        third, usage = message_cost(answers[2]), answers[2].usage
        assert usage is not None and resumed["usage"]["cacheWrite1hTokens"] == \
            usage.cache_write_1h_tokens > 0
        assert third is not None and resumed["cost"]["total"] == usd_text(third.total)
        total = chat_cost(messages)
        expected = sum((s.cost.total for s in finals if s.cost), third.total)
        assert total is not None and total.total == expected
