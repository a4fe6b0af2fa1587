"""A replay's context fit reads the history cache's figures instead of counting every
message each turn (``core._history_facts``): the same fit, media, pairing and layout
as counting them, for any history and any way it grew; and a long stateless chat counts
each message's characters about once, not once per turn."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from unittest import mock

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import turnstate.core._history_facts as facts_module
import turnstate.core._media_fit as media_fit_module
import turnstate.core._overflow as overflow_module
from tests.engine.support import Env
from tests.engine.test_longchat_history_reads import MODEL, PROVIDER
from turnstate.core import ImagePart, TextPart
from turnstate.core._compaction import history_from_compaction
from turnstate.core._context import OverflowPolicy
from turnstate.core._conversation import (
    Message,
    MessageStatus,
    OpaquePart,
    Part,
    Role,
    ToolCallPart,
    ToolResultPart,
)
from turnstate.core._decisions import Strategy
from turnstate.core._history_facts import CountedHistory, extended, facts_of, fit_counted
from turnstate.core._media_fit import fit_history_media
from turnstate.core._overflow import fit_context
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.core._replay_roles import alternating_history
from turnstate.core._tool_pairs import paired_history
from turnstate.providers import AnthropicAdapter, GeminiInteractionsAdapter, OpenAIResponsesAdapter
from turnstate.providers._protocol import ProviderCall


def _parts(kind: int, index: int) -> tuple[Part, ...]:
    png = b"\x89PNG\r\n\x1a\n" + bytes(30 * (index % 5))
    return (
        (TextPart(text="q" * (index % 7)),),
        (TextPart(text="  "),),
        (TextPart(text="look"), ImagePart(data=png, media_type="image/png")),
        (ToolCallPart(call_id=f"c{index}", name="f", arguments="{}", provider="p", model="m"),
         ToolResultPart(call_id=f"c{index}", name="f", output="ok" * index)),
        (ToolCallPart(call_id=f"c{index}", name="f", arguments="{}", provider="p", model="m"),
         TextPart(text="no result")),
        (OpaquePart(provider="anthropic", model="claude-sonnet-4-5", kind="compaction",
                    raw='{"type":"compaction","content":"summary ' + "s" * index + '"}'),
         TextPart(text="after")),
        (TextPart(text="a" * (3 * index + 1)), TextPart(text="b")),
    )[kind]


def _history(spec: list[tuple[bool, int, int]]) -> tuple[Message, ...]:
    now = datetime(2026, 12, 5, tzinfo=UTC)
    return tuple(Message(id=f"m{i}", chat_id="c", seq=i + 1,
                         role=Role.USER if user else Role.ASSISTANT,
                         status=MessageStatus.COMPLETED, parts=_parts(kind, size),
                         created_at=now, updated_at=now)
                 for i, (user, kind, size) in enumerate(spec))


messages = st.lists(st.tuples(st.booleans(), st.integers(0, 6), st.integers(0, 40)),
                    max_size=40)
MODEL_INFO = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")


@settings(max_examples=200, deadline=None, database=None)
@given(spec=messages, cuts=st.lists(st.integers(0, 40), max_size=4),
       limit=st.integers(1, 400), scale=st.sampled_from([1.0, 1.7, 4.0]),
       other=st.integers(0, 200), trim=st.booleans(), offset=st.integers(0, 40))
def test_the_facts_give_what_counting_gives(spec: list[tuple[bool, int, int]], cuts: list[int],
                                            limit: int, scale: float, other: int, trim: bool,
                                            offset: int) -> None:
    history = _history(spec)
    facts = facts_of(())
    at = 0
    for cut in [*sorted(cuts), len(history)]:  # grown a few messages at a time
        facts = extended(facts, history[at:max(at, cut)])
        at = max(at, cut)
    whole = facts_of(history)
    assert [list(getattr(facts, f.name)) if f.name != "alternates" else facts.alternates
            for f in attrs.fields(type(facts))] == \
        [list(getattr(whole, f.name)) if f.name != "alternates" else whole.alternates
         for f in attrs.fields(type(whole))]
    counted = CountedHistory(history, facts)
    assert counted == history
    offset = min(offset, len(history))
    policy = OverflowPolicy.TRIM if trim else OverflowPolicy.ABORT
    assert fit_counted(facts, offset, other_chars=other, context_limit=limit, policy=policy,
                       scale=scale) == fit_context(history[offset:], other_chars=other,
                                                   context_limit=limit, policy=policy,
                                                   scale=scale)
    assert history_from_compaction(counted, "anthropic", MODEL_INFO.name) == \
        history_from_compaction(history, "anthropic", MODEL_INFO.name)
    with mock.patch.object(media_fit_module, "MEDIA_LIMITS",
                           {"anthropic": {"request": 400, "images": 3}}):
        assert fit_history_media(history, (), MODEL_INFO, candidates=facts.media) == \
            fit_history_media(history, (), MODEL_INFO)
    assert (paired_history(history)[1] == 0) == (not facts.unpaired)
    assert (alternating_history(history)[0] is history) == facts.laid_out


@pytest.fixture
def counted_chars(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many messages' characters the context fit and the cache count."""
    calls = [0]
    original = overflow_module.part_chars

    def part_chars(parts: Any) -> int:
        calls[0] += 1
        return original(parts)

    monkeypatch.setattr(overflow_module, "part_chars", part_chars)
    monkeypatch.setattr(facts_module, "part_chars", part_chars)
    return calls


async def test_a_long_stateless_chat_counts_each_message_about_once(
        env: Env, counted_chars: list[int]) -> None:
    turns = 60
    for number in range(turns):
        outcome = await env.turn(f"question {number}", provider=PROVIDER, model=MODEL,
                                 tools=())
        assert outcome.committed
    # Counting the whole history every turn counted sum(2k) = 3,540 messages; now each
    # turn counts the two messages committed since the last (the first turn: none).
    assert counted_chars[0] <= 3 * turns, counted_chars[0]



@pytest.mark.parametrize(("adapter", "provider", "model"), [
    (AnthropicAdapter(), "anthropic", "claude-sonnet-4-5"),
    (OpenAIResponsesAdapter(), "openai", "gpt-4.1"),
    (GeminiInteractionsAdapter(), "gemini", "gemini-2.5-flash"),
], ids=["anthropic", "openai", "gemini"])
def test_a_codec_reads_the_facts_of_a_long_history(
        adapter: Any, provider: str, model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A replay's codec looks for a compaction in the history it is handed: ``ProviderCall``
    keeps the history cache's ``CountedHistory`` as it is (its converter made a plain
    tuple of it), so the codec looks at the messages holding an opaque part (here none),
    not at each of a long chat's messages on every request."""
    import turnstate.core._compaction as compaction_module

    history = _history([(index % 2 == 0, 0, index) for index in range(400)])
    counted = CountedHistory(history, facts_of(history))
    looked = [0]

    def counting_any(items: Any) -> bool:  # ``latest_compaction``'s look at one message
        looked[0] += 1
        return any(items)

    monkeypatch.setattr(compaction_module, "any", counting_any, raising=False)
    call = ProviderCall(strategy=Strategy.REPLAY, model=DEFAULT_REGISTRY.model(provider, model),
                        system_prompt="s", tools=(), history=counted, user_text="next")
    assert getattr(call.history, "facts", None) is not None
    adapter.build_request(call)
    assert looked[0] == 0, looked[0]  # before: 400 messages looked at, per request
