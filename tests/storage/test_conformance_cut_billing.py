"""A turn whose request was cut mid-answer stores what it billed (money, 2026-12-04), on
every store, through the engine and the emulators over loopback: Anthropic's
``message_start`` figures with their cost, and an OpenAI cut's unknown cost as an audit
that says so (``usageMissing``, no usage), where the store kept nothing before."""

from __future__ import annotations

from tests.engine.support import collect, make_turn
from tests.storage.support import Backend
from turnstate.core._cost import audit_cost, usd_text
from turnstate.core._events import TurnAborted
from turnstate.emulators import EmulatedProviders, Fault
from turnstate.engine import TurnEngine
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import decode_audit

QUESTION = "Tell me about the old town, the tram and the river. " * 10


async def test_a_cut_request_is_stored_with_what_it_billed(backend: Backend) -> None:
    store = backend.store
    async with EmulatedProviders(["anthropic", "openai"]) as providers, \
            AiohttpTransport() as transport:
        engine = TurnEngine(store, providers.adapters, transport, clock=backend.clock)
        for provider, model, after in (("anthropic", "claude-sonnet-4-6", 6),
                                       ("openai", "gpt-4o", 8)):
            chat = await store.create_chat(owner="alice")
            providers.emulators[provider].faults.push(Fault(cut_after=after))
            final = (await collect(engine.run_turn(chat.id, make_turn(
                QUESTION, provider=provider, model=model)))).events[-1]
            assert isinstance(final, TurnAborted) and final.reason == "provider_failed"
            answer = (await store.list_messages(chat.id))[-1]
            metadata = decode_audit(answer.provider_state or "").metadata or {}
            assert metadata["cutRequests"] == 1
            if provider == "anthropic":
                assert final.stats.cost is not None and answer.usage == final.stats.usage
                assert answer.usage.input_tokens > 100
                assert audit_cost(answer.provider_state) == usd_text(final.stats.cost.total)
            else:
                assert final.stats.cost is None and answer.usage is None
                assert metadata["usageMissing"] is True
                assert audit_cost(answer.provider_state) is None
