"""User content parts over the emulators (issue 23 item 2): an image or a PDF reaches
each wire, is stored with the user message, is replayed to another provider (the
emulator's echo proves it arrived), becomes a placeholder for a model that takes no
images, rides a cursor turn alone, and is refused before the lease when the model
does not take it or the turn carries too many inline bytes."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.engine.support import collect
from turnstate.core import DEFAULT_REGISTRY, FilePart, ImagePart, InvalidInput, TextPart, Usage
from turnstate.core._events import TurnAborted, TurnCompleted
from turnstate.core._media import omitted_text
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput, TurnLimits
from turnstate.providers._protocol import ProviderAdapter, StreamParser
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore, SqliteStore
from turnstate.storage._protocol import Store

MODELS = {"openai": "gpt-4o", "gemini": "gemini-2.5-flash", "anthropic": "claude-sonnet-4-5",
          "openai-compatible": "gpt-4o-mini", "deepseek": "deepseek-v4-flash"}


def png(width: int = 64, height: int = 32, size: int = 1_024) -> bytes:
    """A PNG of ``size`` bytes whose header says ``width`` x ``height``."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    head = (b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr
            + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr)))
    return head + b"\0" * (size - len(head))


PDF = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n" + b"\0" * 2_000
IMAGE = ImagePart(media_type="image/png", data=png())
SEEN = "an image/png of 1,024 bytes"


@pytest.fixture(params=["memory", "sqlite"])
async def live(request: pytest.FixtureRequest,
               tmp_path: Path) -> AsyncIterator[tuple[EmulatedProviders, TurnEngine, Store]]:
    async with EmulatedProviders() as stack, AiohttpTransport() as transport:
        if request.param == "memory":
            store: Store = MemoryStore()
            yield stack, TurnEngine(store, stack.adapters, transport), store
            return
        async with SqliteStore.open(str(tmp_path / "chat.db")) as sqlite:
            yield stack, TurnEngine(sqlite, stack.adapters, transport), sqlite


def turn(provider: str, *parts: TextPart | ImagePart | FilePart, text: str | None = None,
         model: str | None = None) -> TurnInput:
    model = model or MODELS[provider]
    if text is not None:
        return TurnInput(provider=provider, model=model, system_prompt="", user_text=text)
    return TurnInput(provider=provider, model=model, system_prompt="", content=parts)


async def answer(engine: TurnEngine, chat_id: str, request: TurnInput) -> TurnCompleted:
    outcome = await collect(engine.run_turn(chat_id, request))
    assert isinstance(outcome.final, TurnCompleted), outcome.final
    return outcome.final


@pytest.mark.parametrize(("first", "second"), [("anthropic", "openai-compatible"),
                                                ("openai-compatible", "anthropic"),
                                                ("anthropic", "openai"), ("openai", "gemini"),
                                                ("gemini", "anthropic")])
async def test_an_image_travels_through_replay_on_anthropic_and_chat_completions(
    live: tuple[EmulatedProviders, TurnEngine, Store], first: str, second: str,
) -> None:
    stack, engine, store = live
    chat = await store.create_chat(owner="o")
    sent = await answer(engine, chat.id, turn(first, TextPart(text="Look at this."), IMAGE))
    assert f"Attached: {SEEN}." in sent.text
    replayed = await answer(engine, chat.id, turn(second, text="What did I send?"))
    assert f"Earlier: {SEEN}." in replayed.text  # the second provider got the image
    body = stack.emulators[second].requests[-1].body.decode()
    assert base64.b64encode(IMAGE.data or b"").decode() in body
    history = await store.load_history(chat.id)
    assert history[0].parts == (TextPart(text="Look at this."), IMAGE)  # stored as sent


async def test_history_holding_an_image_reaches_a_text_only_model_as_a_placeholder(
    live: tuple[EmulatedProviders, TurnEngine, Store],
) -> None:
    stack, engine, store = live
    chat = await store.create_chat(owner="o")
    await answer(engine, chat.id, turn("anthropic", TextPart(text="See."), IMAGE))
    # DeepSeek takes no images: its emulator answers an image_url part with the API's 400.
    replayed = await answer(engine, chat.id, turn("deepseek", text="And now?"))
    assert "Earlier" not in replayed.text
    body = json.loads(stack.emulators["deepseek"].requests[-1].body)
    assert body["messages"][0] == {"role": "user", "content": "See.\n" + omitted_text(IMAGE)}
    assert omitted_text(IMAGE) == "[image omitted: image/png, 1,024 bytes]"


@pytest.mark.parametrize("provider", ["openai", "gemini"])
async def test_a_cursor_turn_sends_only_the_new_message_with_its_image(
    live: tuple[EmulatedProviders, TurnEngine, Store], provider: str,
) -> None:
    stack, engine, store = live
    chat = await store.create_chat(owner="o")
    await answer(engine, chat.id, turn(provider, text="Hello."))
    sent = await answer(engine, chat.id, turn(provider, TextPart(text="This one."), IMAGE,
                                              FilePart(data=PDF, filename="a.pdf")))
    assert sent.stats.requests == 1
    assert f"Attached: {SEEN}; an application/pdf of {len(PDF):,} bytes." in sent.text
    body = json.loads(stack.emulators[provider].requests[-1].body)
    assert body.get("previous_response_id") or body.get("previous_interaction_id")
    assert len(body["input"]) == 1  # the new user message alone, its parts inside
    later = await answer(engine, chat.id, turn(provider, text="And before?"))
    assert f"Earlier: {SEEN}" in later.text  # the provider's stored conversation has it


async def test_a_part_the_model_does_not_take_is_refused_before_the_lease(
    live: tuple[EmulatedProviders, TurnEngine, Store],
) -> None:
    stack, engine, store = live
    chat = await store.create_chat(owner="o")
    with pytest.raises(InvalidInput) as refused:
        await collect(engine.run_turn(chat.id, turn("deepseek", TextPart(text="x"), IMAGE)))
    assert refused.value.field == "content[1]"
    assert "does not take image input" in refused.value.problem
    with pytest.raises(InvalidInput) as refused:  # DeepSeek takes no PDF either
        await collect(engine.run_turn(chat.id, turn("deepseek", FilePart(data=PDF))))
    assert refused.value.field == "content[0]"
    assert stack.emulators["deepseek"].requests == []
    assert (await store.load_chat(chat.id)).version == chat.version  # no lease was taken
    assert await store.load_history(chat.id) == ()


async def test_inline_bytes_over_the_engines_bound_are_refused_before_the_lease(
    live: tuple[EmulatedProviders, TurnEngine, Store],
) -> None:
    stack, _, store = live
    async with AiohttpTransport() as transport:
        engine = TurnEngine(store, stack.adapters, transport,
                            limits=TurnLimits(max_inline_bytes=2_000))
        chat = await store.create_chat(owner="o")
        with pytest.raises(InvalidInput) as refused:
            await collect(engine.run_turn(chat.id, turn("openai", IMAGE, IMAGE)))
        assert refused.value.field == "content"
        assert "2,048 bytes" in refused.value.problem
        assert (await store.load_chat(chat.id)).version == chat.version
        await answer(engine, chat.id, turn("openai", IMAGE))  # 1,024 bytes: within it


class Unreported:
    """An adapter whose responses report no usage, so the turn's snapshot is the
    engine's own estimate."""

    def __init__(self, adapter: ProviderAdapter) -> None:
        self.adapter = adapter

    def __getattr__(self, name: str) -> Any:
        return getattr(self.adapter, name)

    def stream_parser(self) -> StreamParser:
        parser = self.adapter.stream_parser()
        finish = parser.finish
        parser.finish = lambda: attrs.evolve(finish(), usage=Usage())  # type: ignore[method-assign]
        return parser


@pytest.mark.parametrize(("provider", "tokens"), [("anthropic", 1_334), ("openai", 765),
                                                  ("gemini", 1_032)])
async def test_the_estimate_counts_the_image_by_the_providers_rule_not_its_bytes(
    live: tuple[EmulatedProviders, TurnEngine, Store], provider: str, tokens: int,
) -> None:
    stack, _, store = live
    adapters = {**stack.adapters, provider: Unreported(stack.adapters[provider])}
    big = ImagePart(media_type="image/png", data=png(1_000, 1_000, size=200_000))
    async with AiohttpTransport() as transport:
        engine = TurnEngine(store, adapters, transport)  # type: ignore[arg-type]
        chat = await store.create_chat(owner="o")
        outcome = await collect(engine.run_turn(chat.id, turn(provider, TextPart(text="x"),
                                                                big)))
    (event,) = outcome.of_type("context_snapshot")
    assert event.snapshot.source == "estimate"
    assert tokens <= event.snapshot.estimated_input_tokens < tokens + 50


async def test_the_emulators_report_an_images_tokens_and_take_large_bodies(
    live: tuple[EmulatedProviders, TurnEngine, Store],
) -> None:
    """Usage counts an image by its documented tokens (not its base64 length), and a
    body beyond aiohttp's 1 MiB default is read."""
    _, engine, store = live
    chat = await store.create_chat(owner="o")
    big = ImagePart(media_type="image/png", data=png(1_000, 1_000, size=2_000_000))
    outcome = await collect(engine.run_turn(chat.id, turn("openai-compatible",
                                                          TextPart(text="x"), big)))
    assert isinstance(outcome.final, TurnCompleted), outcome.final
    (event,) = outcome.of_type("context_snapshot")
    assert event.snapshot.source == "provider"
    assert 765 <= event.snapshot.estimated_input_tokens < 900


async def test_an_image_over_the_context_window_aborts_before_the_request(
    live: tuple[EmulatedProviders, TurnEngine, Store],
) -> None:
    stack, _, store = live
    info = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")
    registry = DEFAULT_REGISTRY.with_model(attrs.evolve(info, context_limit=1_300))
    async with AiohttpTransport() as transport:
        engine = TurnEngine(store, stack.adapters, transport, registry=registry)
        chat = await store.create_chat(owner="o")
        large = ImagePart(media_type="image/png", data=png(1_000, 1_000))  # 1,334 tokens
        outcome = await collect(engine.run_turn(chat.id, turn("anthropic", large)))
        assert isinstance(outcome.final, TurnAborted)
        assert outcome.final.reason == "context_overflow"
        assert stack.emulators["anthropic"].requests == []
        small = ImagePart(media_type="image/png", data=png(100, 100, size=500_000))
        await answer(engine, chat.id, turn("anthropic", small))  # 14 tokens, 500 KB
