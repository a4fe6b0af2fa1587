"""A relay's in-stream error given as text (``data: {"error": "upstream timed out"}``) is
an error frame for every parser, as the same text is for an error body (attack3).

Every parser took a frame's ``error`` as an error only when it was an object. The text
form, which ``holds_error`` already takes in a body ("gateways"), was an ordinary frame:
sent mid-stream it was skipped (the turn went on as if nothing had failed), sent last it
left "the stream ended before ..." and the provider's reason was lost.
"""

from __future__ import annotations

import json

import pytest

from tests.engine.support import FakeClock, collect, make_turn
from tests.faults.hostile import sse_server
from tests.faults.rig import quick_transport
from tests.faults.test_limits import MODELS, PROVIDERS
from turnstate.emulators._emulated import EmulatedProviders, kind_of
from turnstate.engine import TurnEngine
from turnstate.providers._frames import error_object
from turnstate.storage import MemoryStore

ERROR = b'data: {"error": "upstream timed out"}\n\n'


async def _first_events(provider: str) -> bytes:
    """The first three events of the emulator's answer to "hi" (the answer begun)."""
    async with EmulatedProviders() as stack, quick_transport() as transport:
        store = MemoryStore(clock=FakeClock())
        chat = await store.create_chat(owner="t")
        captured: list[bytes] = []

        class Recording:  # the transport's batches as they came, re-serialised
            FINISHES_ON_SEND = False

            async def stream(self, request, classify):  # type: ignore[no-untyped-def]
                async for event in transport.stream(request, classify):
                    name = f"event: {event.event}\n" if event.event != "message" else ""
                    captured.append(f"{name}data: {event.data}\n\n".encode())
                    yield event

            async def before_restart(self, restarts, error):  # type: ignore[no-untyped-def]
                return False

        adapter = kind_of(provider).adapter(base_url=stack.base_url(provider), api_key="k")
        engine = TurnEngine(store, {provider: adapter}, Recording(), clock=FakeClock())
        await collect(engine.run_turn(chat.id, make_turn("hi", provider=provider,
                                                         model=MODELS[provider])))
    return b"".join(captured[:3])


@pytest.mark.parametrize("where", ["last", "mid-stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_text_error_frame_fails_the_turn_with_its_text(provider: str, where: str) -> None:
    begun = await _first_events(provider)
    body = begun + ERROR if where == "last" else begun + ERROR + begun
    store = MemoryStore(clock=FakeClock())
    chat = await store.create_chat(owner="relay")
    async with sse_server(body) as base_url, quick_transport() as transport:
        adapter = kind_of(provider).adapter(base_url=base_url, api_key="k")
        engine = TurnEngine(store, {provider: adapter}, transport, clock=FakeClock())
        outcome = await collect(engine.run_turn(chat.id, make_turn(
            "hi", provider=provider, model=MODELS[provider])))
    final = outcome.final
    assert final.type == "turn_aborted" and final.reason == "provider_failed", final
    assert "upstream timed out" in (final.detail or ""), final.detail
    assert (await store.load_chat(chat.id)).active_turn_id is None


def test_error_object_of_a_frame() -> None:
    assert error_object({"message": "m"}) == {"message": "m"}
    assert error_object("upstream timed out") == {"message": "upstream timed out"}
    assert error_object("") is None and error_object(None) is None
    assert error_object([1]) is None and error_object(5) is None


def test_the_recorded_prefix_is_an_answer_begun() -> None:
    """A guard on the helper: three events, none of them an error."""
    import asyncio

    for provider in PROVIDERS:
        begun = asyncio.run(_first_events(provider))
        assert begun.count(b"data: ") == 3 and b'"error"' not in begun.replace(
            b'"error":null', b""), begun
        json.loads(begun.split(b"data: ")[1].split(b"\n")[0])
