"""Whole turns over loopback for the wire corpus's shapes, produced by the emulators on
request (``[[call:X*2]]``, ``[[search:Q]]``, ``[[refuse]]``, ``[[cutoff]]``, ``[[think]]``):
what the turn commits, how it ends, and what the next request sends back.

Durable turns also check invariant 2 after every turn (``Live.turn``): the cursor stands
for exactly the committed history, so a shape the emulator keeps differently from the
store fails here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.engine.support import FakeClock
from tests.engine.test_emulated import Live, _live
from turnstate.core._conversation import (
    Message,
    OpaquePart,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from turnstate.emulators._conversation_model import REFUSAL
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore, SqliteStore

MODELS = {"openai": "gpt-4o", "gemini": "gemini-2.5-flash", "openai-compatible": "gpt-4o-mini",
          "deepseek": "deepseek-chat", "anthropic": "claude-sonnet-4-5"}
STATELESS = ("openai-compatible", "deepseek", "anthropic")
ANSWER = "You said: tell me about the three causes"


@pytest.fixture(params=["memory", "sqlite"])
async def live(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[Live]:
    clock = FakeClock()
    options = {"anthropic": {"thinking_budget_tokens": 1024},
               "openai": {"include_encrypted_reasoning": True}}
    async with EmulatedProviders(adapter_options=options) as stack, \
            AiohttpTransport() as transport:
        if request.param == "memory":
            yield await _live(stack, MemoryStore(clock=clock), transport, clock)
        else:
            async with SqliteStore.open(tmp_path / "shapes.sqlite", clock=clock) as store:
                yield await _live(stack, store, transport, clock)


async def _assistant(live: Live) -> Message:
    history = await live.store.load_history(live.chat_id)
    assert history[-1].role == Role.ASSISTANT
    return history[-1]


def _kinds(message: Message) -> list[str]:
    return [type(p).__name__ if not isinstance(p, OpaquePart) else p.kind
            for p in message.parts if not type(p).__name__.startswith("Transition")]


def _sent(live: Live, provider: str) -> str:
    """The last request's body as text: what it sent back."""
    return live.requests(provider)[-1].body.decode("utf-8")


async def _replay_next(live: Live, provider: str, model: str | None = None) -> Any:
    """A next turn that must replay the history (the prompt changed, or stateless)."""
    outcome = await live.turn("next", provider=provider, model=model or MODELS[provider],
                              prompt="Changed instructions.")
    assert outcome.committed, outcome.final
    if provider not in STATELESS:
        assert outcome.final.degradation in ("system_prompt_changed", "model_changed")
        assert outcome.states[1] == "replay"
    return live.requests(provider)[-1].json


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_parallel_calls_commit_both_and_replay_both(live: Live, provider: str) -> None:
    """Two calls in one response: both run, both results go back in one request, the
    answer names both, and the committed message holds call, call, result, result."""
    outcome = await live.turn("[[call:weather*2]] two cities", provider=provider,
                              model=MODELS[provider])
    assert outcome.committed, outcome.final
    assert outcome.final.stats.requests == 2
    assert outcome.final.text.startswith("Tool results: weather=")
    assert outcome.final.text.count("weather=") == 2
    message = await _assistant(live)
    calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
    results = [p for p in message.parts if isinstance(p, ToolResultPart)]
    assert len(calls) == 2 and calls[0].call_id != calls[1].call_id
    assert [r.call_id for r in results] == [c.call_id for c in calls]
    loop = _sent(live, provider)
    assert all(call.call_id in loop for call in calls)
    body = await _replay_next(live, provider)
    assert all(call.call_id in json.dumps(body) for call in calls)


@pytest.mark.parametrize("provider", ["openai", "openai-compatible"])
async def test_refusal_is_committed_as_the_answer_and_replayed(
    live: Live, provider: str
) -> None:
    """A refusal (OpenAI ``refusal`` content, Chat Completions ``delta.refusal``) is the
    turn's text, kept and sent back."""
    outcome = await live.turn("[[refuse]] something bad", provider=provider,
                              model=MODELS[provider])
    assert outcome.committed and outcome.final.text == REFUSAL
    assert _kinds(await _assistant(live)) == ["TextPart"]
    body = await _replay_next(live, provider)
    assert json.dumps(REFUSAL)[1:-1] in json.dumps(body)


async def test_an_anthropic_refusal_commits_no_text_and_keeps_its_details(live: Live) -> None:
    """Anthropic's refusal has no content block (the recorded ``anthropic-refusal``): the
    turn completes with finish ``refusal`` and no text, the API's explanation in the
    audit's ``stopDetails``, and the next request replays it as ``[empty answer]`` (an
    empty assistant message is a 400) (wire9)."""
    outcome = await live.turn("[[refuse]] something bad", provider="anthropic",
                              model=MODELS["anthropic"])
    assert outcome.committed and outcome.final.text == ""
    assert outcome.final.finish_reason == "refusal"
    message = await _assistant(live)
    assert message.parts == ()
    assert json.loads(message.provider_state or "{}")["metadata"]["stopDetails"][
        "explanation"] == REFUSAL
    body = await _replay_next(live, "anthropic")
    assert body["messages"][1] == {"role": "assistant", "content": [
        {"type": "text", "text": "[empty answer]"}]}


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_cut_off_answer_is_committed_partial_and_replayed(
    live: Live, provider: str
) -> None:
    """``incomplete`` / ``max_tokens`` / ``length``: the partial text is the turn's answer
    (nothing lost, nothing doubled) and the next request carries exactly it."""
    outcome = await live.turn("[[cutoff]] tell me about the three causes",
                              provider=provider, model=MODELS[provider])
    partial = outcome.final.text
    assert outcome.committed and partial and ANSWER.startswith(partial) and partial != ANSWER
    message = await _assistant(live)
    assert [p.text for p in message.parts if isinstance(p, TextPart)] == [partial]
    body = await _replay_next(live, provider)
    assert json.dumps(partial)[1:-1] in json.dumps(body)
    assert json.dumps(body).count(partial.strip()) == 1


SEARCH_KINDS = {"openai": ["web_search_call", "TextPart"],
                # a signed thought opens every Gemini interaction, as recorded (wire10)
                "gemini": ["ReasoningPart", "google_search_call", "google_search_result",
                           "TextPart"],
                "anthropic": ["server_tool_use", "web_search_tool_result", "TextPart"]}


@pytest.mark.parametrize("provider", sorted(SEARCH_KINDS))
async def test_server_search_is_kept_opaque_and_replayed_to_the_same_model(
    live: Live, provider: str
) -> None:
    """Server-tool items, blocks and steps become opaque parts in order; a replay to the
    same model sends them back verbatim (the emulator accepts them), another model's
    replay leaves them out."""
    outcome = await live.turn("[[search:lyon_weather]] weather?", provider=provider,
                              model=MODELS[provider])
    assert outcome.committed, outcome.final
    message = await _assistant(live)
    assert _kinds(message) == SEARCH_KINDS[provider]
    opaque = [json.loads(p.raw) for p in message.parts if isinstance(p, OpaquePart)]
    assert "lyon weather" in json.dumps(opaque[0])
    if provider == "anthropic":
        # Anthropic sends server-tool blocks back only inside the turn's tool loop.
        await live.turn('[[search:lyon_weather]] [[call:weather {"city": "Lyon"}]] go',
                        provider=provider, model=MODELS[provider])
        loop = live.requests(provider)[-1].json["messages"]
        kinds = [b["type"] for b in loop[-2]["content"]]
        assert kinds == ["server_tool_use", "web_search_tool_result", "tool_use"]
        return
    body = await _replay_next(live, provider)
    key = "input"
    assert all(item in body[key] for item in opaque)
    other = {"openai": "gpt-4.1", "gemini": "gemini-2.5-pro"}[provider]
    body = await _replay_next(live, provider, other)
    assert not any(item in body[key] for item in opaque)


async def test_openai_encrypted_reasoning_is_kept_and_replayed(live: Live) -> None:
    """Asked with ``include: ["reasoning.encrypted_content"]``, a reasoning model's item
    carries ``encrypted_content``; a replay to the same model sends it back with its
    ``rs_`` id (the API reference requires it)."""
    outcome = await live.turn("[[think]] why?", provider="openai", model="gpt-5-mini")
    assert outcome.committed and outcome.of_type("reasoning_delta")
    assert live.requests("openai")[-1].json["include"] == ["reasoning.encrypted_content"]
    (reasoning,) = [p for p in (await _assistant(live)).parts
                    if isinstance(p, ReasoningPart)]
    assert reasoning.data and reasoning.data.startswith("emulated-reasoning:")
    body = await _replay_next(live, "openai", "gpt-5-mini")
    (sent,) = [i for i in body["input"] if i.get("type") == "reasoning"]
    assert sent == {"type": "reasoning", "id": reasoning.signature,
                    "encrypted_content": reasoning.data,
                    "summary": [{"type": "summary_text", "text": reasoning.text}]}


async def test_anthropic_redacted_thinking_goes_back_in_the_loop(live: Live) -> None:
    """A ``redacted_thinking`` block is kept with its data and returned unchanged inside
    the tool loop, where the emulator checks it."""
    emulator: Any = live.stack.emulators["anthropic"]
    emulator.redact_thinking = True
    outcome = await live.turn('[[think]] [[call:weather {"city": "Oslo"}]] go',
                              provider="anthropic", model=MODELS["anthropic"])
    assert outcome.committed, outcome.final
    reasoning, _ = [p for p in (await _assistant(live)).parts
                    if isinstance(p, ReasoningPart)]  # one per round
    assert reasoning.kind == "redacted_thinking" and reasoning.data
    loop = live.requests("anthropic")[-1].json["messages"]
    assert loop[-2]["content"][0] == {"type": "redacted_thinking", "data": reasoning.data}


async def test_gemini_text_signature_is_kept_and_replayed_to_the_same_model(
    live: Live,
) -> None:
    """A thinking answer without calls signs its ``model_output`` step; the signature is
    committed after the text and goes back on that step in a replay to the same model
    (the emulator refuses signatures it never issued), and not to another model."""
    outcome = await live.turn("[[think]] why?", provider="gemini", model="gemini-2.5-flash")
    assert outcome.committed, outcome.final
    parts = (await _assistant(live)).parts
    text_index = next(i for i, p in enumerate(parts) if isinstance(p, TextPart))
    mark = parts[text_index + 1]
    assert isinstance(mark, ReasoningPart) and mark.kind == "text_signature"
    body = await _replay_next(live, "gemini")
    (sent,) = [s for s in body["input"] if s["type"] == "model_output"]
    assert sent["signature"] == mark.signature
    body = await _replay_next(live, "gemini", "gemini-2.5-pro")
    assert all("signature" not in s for s in body["input"] if s["type"] == "model_output")
