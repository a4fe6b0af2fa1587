"""A chat whose text the provider counts at about twice turnstate's estimate (four
characters a token: CJK text, code, base64-like text tokenise far denser), against the
five emulators over loopback with ``token_ratio = 2`` and a window set per model.

Before the fix, the first replay or local-loop request the estimate said fits but the
provider refused as too long aborted ``provider_failed`` (Anthropic's and the
OpenAI-compatible refusals were not even read as ``ContextLengthExceeded``), and every
later turn was refused the same way: the chat was dead for good. Now the refusal loops
back (``context_refused``, table rule 10): the scale learnt from the refusal (the
provider's own count when it gives one, else doubling) trims the request again, the
chat's scale is remembered, and every turn commits.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest

from tests.engine.support import collect
from turnstate.core._context import ContextSettings
from turnstate.core._events import TurnAborted, TurnCompleted
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore

MODEL = "demo-dense"
LIMIT = 8_000
PROVIDERS = ("gemini", "openai", "anthropic", "openai-compatible", "deepseek")
REGISTRY = DEFAULT_REGISTRY
for _provider in PROVIDERS:
    REGISTRY = REGISTRY.with_model(ModelInfo(provider=_provider, name=MODEL,
                                             context_limit=LIMIT))
CURSOR_FIELD = {"gemini": "previous_interaction_id", "openai": "previous_response_id"}
TRIM = ContextSettings(provider_compaction_enabled=False, overflow="trim")
NO_COMPACTION = ContextSettings(provider_compaction_enabled=False)


@attrs.define
class Chat:
    providers: EmulatedProviders
    engine: TurnEngine
    store: MemoryStore
    chat_id: str
    provider: str

    @property
    def emulator(self) -> Any:
        return self.providers.emulators[self.provider]

    @property
    def durable(self) -> bool:
        return self.provider in CURSOR_FIELD

    async def turn(self, text: str) -> TurnCompleted | TurnAborted:
        # A cursor chat needs no opt-in (its overflow always trims); a stateless one
        # trims only when asked (the default policy aborts, test below).
        turn = TurnInput(provider=self.provider, model=MODEL, system_prompt="You are terse.",
                         user_text=text, context=NO_COMPACTION if self.durable else TRIM)
        final = (await collect(self.engine.run_turn(self.chat_id, turn))).events[-1]
        assert isinstance(final, TurnCompleted | TurnAborted)
        return final


@pytest.fixture
async def chat(request: pytest.FixtureRequest) -> AsyncIterator[Chat]:
    provider, window = request.param
    async with EmulatedProviders([provider]) as providers, AiohttpTransport() as transport:
        emulator = providers.emulators[provider]
        emulator.context_windows[MODEL] = window  # type: ignore[attr-defined]
        emulator.token_ratio = 2.0
        store = MemoryStore()
        engine = TurnEngine(store, providers.adapters, transport, registry=REGISTRY)
        created = await store.create_chat(owner="alice")
        yield Chat(providers, engine, store, created.id, provider)


def _filler(number: int) -> str:
    return f"turn {number}: " + "lorem ipsum dolor sit amet " * 80  # ~550 estimated tokens


def _steps(final: TurnCompleted | TurnAborted) -> list[tuple[str, str, str]]:
    return [(s.source, s.trigger, s.dest) for s in final.path]


ALL = [(p, 7_000 if p in CURSOR_FIELD else LIMIT) for p in PROVIDERS]


@pytest.mark.parametrize("chat", ALL, indirect=True, ids=PROVIDERS)
async def test_a_dense_chat_keeps_committing(chat: Chat) -> None:
    turns = 30
    finals = []
    for number in range(turns):
        final = await chat.turn(_filler(number))
        assert isinstance(final, TurnCompleted), (number, final)
        finals.append(final)
    refused = [n for n, f in enumerate(finals)
               if ("context_refused" in (s[1] for s in _steps(f)))]
    assert refused, "the provider never refused: the test does not test the fix"
    # The scale is learnt once and remembered: most turns after the first refusal are
    # not refused again (a cursor chat's own refusals are the cursor's, rule 9).
    assert len(refused) <= 3, refused
    for n in refused:
        steps = _steps(finals[n])
        state = "replay" if chat.durable else "local_loop"
        assert (state, "context_refused", state) in steps
        assert steps[-2:] == [(state, "completed", "persist"), ("persist", "committed", "done")]
    # Nothing stored is lost, and the audit names each turn's cut and its scale.
    history = await chat.store.load_history(chat.chat_id)
    assert len(history) == 2 * turns
    audits = [json.loads(m.provider_state or "{}") for m in history if m.role == "assistant"]
    for n in refused:
        trim = audits[n]["metadata"]["contextTrimmed"]
        assert trim["tokenScale"] >= 1.5 and trim["droppedMessages"] > 0
    # Past the first refusal, every request the emulator answered fitted its window.
    learnt = chat.engine.calibrations.get((chat.chat_id, chat.provider, MODEL))
    assert learnt.scale >= 1.5
    if chat.durable:  # and the chat went on by cursor after each trimmed replay
        assert any(f.strategy == "cursor" for f in finals[refused[-1] + 1:])


@pytest.mark.parametrize("chat", [("anthropic", LIMIT), ("openai-compatible", LIMIT)],
                         indirect=True, ids=["anthropic", "openai-compatible"])
async def test_the_default_policy_aborts_typed_and_the_scale_is_remembered(
        chat: Chat) -> None:
    """Without ``overflow="trim"`` a stateless chat never trims: the refusal is the typed
    ``context_overflow`` with the provider's words (was ``provider_failed``), and the next
    turn, knowing the chat's scale, aborts before sending anything."""
    finals = []
    for number in range(12):
        turn = TurnInput(provider=chat.provider, model=MODEL, system_prompt="You are terse.",
                         user_text=_filler(number), context=NO_COMPACTION)
        finals.append((await collect(chat.engine.run_turn(chat.chat_id, turn))).events[-1])
        if isinstance(finals[-1], TurnAborted):
            break
    refused = finals[-1]
    assert isinstance(refused, TurnAborted), "the chat never reached the window"
    assert refused.reason == "context_overflow"
    assert refused.failure is not None
    assert refused.failure.error_type == "context_length_exceeded"
    sent = len(chat.emulator.requests)
    turn = TurnInput(provider=chat.provider, model=MODEL, system_prompt="You are terse.",
                     user_text=_filler(99), context=NO_COMPACTION)
    again = (await collect(chat.engine.run_turn(chat.chat_id, turn))).events[-1]
    assert isinstance(again, TurnAborted) and again.reason == "context_overflow"
    assert len(chat.emulator.requests) == sent  # decided before sending


PASTE_PROVIDERS = ["gemini", "openai", "anthropic", "deepseek"]


@pytest.mark.parametrize("chat", [(p, 7_000) for p in PASTE_PROVIDERS], indirect=True,
                         ids=PASTE_PROVIDERS)
async def test_a_paste_longer_than_the_window_fails_alone(chat: Chat) -> None:
    """A message whose estimate fits but whose real count alone exceeds the window (about
    0.6 of it estimated, 1.2 of it counted): that turn aborts ``context_overflow``, the
    user's next, smaller message commits (by cursor on a durable chat: the refused
    requests never moved the stored cursor), and nothing loops."""
    for number in range(3):
        assert isinstance(await chat.turn(_filler(number)), TurnCompleted)
    before = len(chat.emulator.requests)
    paste = await chat.turn("paste: " + "qwertyuiop " * 1_550)  # ~4,270 estimated tokens
    assert isinstance(paste, TurnAborted), paste
    assert paste.reason == "context_overflow"
    assert paste.detail and "oldest messages" in paste.detail and "window" in paste.detail
    assert len(chat.emulator.requests) - before <= 5  # bounded: no loop
    after = await chat.turn("a short question")
    assert isinstance(after, TurnCompleted), after
    if chat.durable:
        assert after.strategy == "cursor"
    history = await chat.store.load_history(chat.chat_id)
    assert len(history) == 8  # the paste's turn is not in the committed history


@pytest.mark.parametrize("chat", [("gemini", 7_000)], indirect=True, ids=["gemini"])
async def test_a_message_that_fits_the_window_alone_is_sent_alone(chat: Chat) -> None:
    """A message needing more than the trimmed replay's 70% of the window but less than
    the window (the provider's stated 7,000, below the registry's 8,000) is sent with no
    history rather than refused before sending (it aborted ``context_overflow``)."""
    chat.emulator.token_ratio = 1.0
    for number in range(6):
        assert isinstance(await chat.turn(_filler(number)), TurnCompleted)
    big = await chat.turn("big: " + "qwertyuiop " * 2_110)  # ~5,800 estimated tokens
    assert isinstance(big, TurnCompleted), big
    assert big.strategy == "replay" and big.degradation == "context_overflow"
    assert isinstance(await chat.turn("and a short one"), TurnCompleted)
