"""OpenTelemetry spans of turns (issue 17), checked with the SDK's in-memory exporter.

Span trees are compared as nested (name, children) tuples; attributes are checked on the
spans that carry them. The import rules are checked in fresh interpreters.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests.engine.support import Env, FakeClock, tool
from turnstate.core import parse_envelope
from turnstate.emulators._scripted import ScriptedBackend, ScriptStep
from turnstate.engine import TurnEngine
from turnstate.engine._tracing import REDACTED
from turnstate.providers.gemini_interactions import GeminiInteractionsAdapter
from turnstate.providers.openai_responses import OpenAIResponsesAdapter
from turnstate.storage import MemoryStore


class Traced(Env):
    exporter: InMemorySpanExporter

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def last_tree(self) -> tuple[Any, ...]:
        return tree(self.spans(), root_of(self.spans()))

    def clear(self) -> None:
        self.exporter.clear()


def in_memory_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@pytest.fixture
async def traced() -> AsyncIterator[Traced]:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    backend = ScriptedBackend()
    provider, exporter = in_memory_provider()
    engine = TurnEngine(store, backend.adapters(), backend, clock=clock,
                        tracer_provider=provider)
    chat = await store.create_chat(owner="alice")
    env = Traced(store=store, backend=backend, engine=engine, clock=clock, chat_id=chat.id)
    env.exporter = exporter
    yield env
    provider.shutdown()


def root_of(spans: list[ReadableSpan]) -> ReadableSpan:
    [root] = [s for s in spans if s.name == "turnstate.turn"]
    return root


def children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    found = [s for s in spans if s.parent is not None
             and s.parent.span_id == parent.context.span_id]
    return sorted(found, key=lambda s: s.start_time or 0)


def tree(spans: list[ReadableSpan], span: ReadableSpan) -> tuple[Any, ...]:
    kids = tuple(tree(spans, child) for child in children(spans, span))
    return (span.name, kids) if kids else (span.name,)


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def attrs_of(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


CHAT = ("chat gpt-4o",)


async def test_cursor_turn(traced: Traced) -> None:
    """validate, cursor (with its request), persist under one turn span: the final
    state ``done`` is the turn span's outcome, not a span of its own (issue 26)."""
    await traced.turn("one")
    traced.clear()
    await traced.turn("two")
    assert traced.last_tree() == ("turnstate.turn", (
        ("validate",), ("cursor", (CHAT,)), ("persist",)))
    spans = traced.spans()
    turn = attrs_of(root_of(spans))
    assert turn["turnstate.outcome"] == "committed" and turn["turnstate.strategy"] == "cursor"
    assert turn["turnstate.provider"] == "openai" and turn["turnstate.model"] == "gpt-4o"
    assert turn["turnstate.chat_id"] == traced.chat_id and turn["turnstate.requests"] == 1
    assert turn["turnstate.request_bytes"] > 0 and "turnstate.cache_hit_tokens" in turn
    assert "turnstate.degradation" not in turn
    [request] = named(spans, "chat gpt-4o")
    gen_ai = attrs_of(request)
    assert gen_ai["gen_ai.system"] == "openai" and gen_ai["gen_ai.request.model"] == "gpt-4o"
    assert gen_ai["gen_ai.operation.name"] == "chat"
    assert gen_ai["gen_ai.usage.input_tokens"] > 0 and "gen_ai.usage.output_tokens" in gen_ai
    assert gen_ai["gen_ai.response.id"] == REDACTED
    assert request.kind.name == "CLIENT"
    assert attrs_of(named(spans, "cursor")[0])["turnstate.trigger"] == "completed"


async def test_degraded_replay_turn(traced: Traced) -> None:
    """A cursor the provider rejects: a failed request under cursor, then the replay."""
    await traced.turn("one")
    traced.clear()
    traced.backend.push("openai", ScriptStep.reject_cursor("cursor_expired"))
    await traced.turn("two")
    assert traced.last_tree() == ("turnstate.turn", (
        ("validate",), ("cursor", (CHAT,)), ("replay", (CHAT,)), ("persist",)))
    spans = traced.spans()
    failed, answered = sorted(named(spans, "chat gpt-4o"), key=lambda s: s.start_time or 0)
    assert attrs_of(failed)["error.type"] == "cursor_expired"
    assert failed.status.status_code is StatusCode.ERROR
    assert attrs_of(answered)["turnstate.strategy"] == "replay"
    assert "error.type" not in attrs_of(answered)
    turn = attrs_of(root_of(spans))
    assert turn["turnstate.degradation"] == "cursor_expired"
    assert turn["turnstate.strategy"] == "replay" and turn["turnstate.requests"] == 2
    assert attrs_of(named(spans, "cursor")[0])["turnstate.reason"] == "cursor_expired"
    traced.clear()
    await traced.turn("three", model="gpt-4.1")
    assert attrs_of(root_of(traced.spans()))["turnstate.degradation"] == "model_changed"


async def test_tool_loop(traced: Traced) -> None:
    """Each state visit is its own span; each call state has its own request."""
    await traced.turn("one")
    traced.clear()
    traced.backend.push("openai", ScriptStep.call(("weather", {"city": "Paris"})),
                        ScriptStep.reply("sunny"))
    await traced.turn("weather?")
    assert traced.last_tree() == ("turnstate.turn", (
        ("validate",), ("cursor", (CHAT,)), ("tool_iteration", (("execute_tool weather",),)),
        ("cursor", (CHAT,)), ("persist",)))
    spans = traced.spans()
    iterations = [attrs_of(s)["turnstate.iteration"]
                  for s in sorted(named(spans, "chat gpt-4o"), key=lambda s: s.start_time or 0)]
    assert iterations == [0, 1]
    turn = attrs_of(root_of(spans))
    assert turn["turnstate.tool_calls"] == 1 and turn["turnstate.requests"] == 2


async def test_aborted_turn(traced: Traced) -> None:
    """A provider failure: an error request span, then abort; the turn span is an
    error with the abort reason as its outcome (``aborted`` gets no span)."""
    traced.backend.push("openai", ScriptStep.fail(400, "invalid_request_error"))
    await traced.turn("x")
    assert traced.last_tree() == ("turnstate.turn", (
        ("validate",), ("replay", (CHAT,)), ("abort",)))
    spans = traced.spans()
    root = root_of(spans)
    assert attrs_of(root)["turnstate.outcome"] == "provider_failed"
    assert root.status.status_code is StatusCode.ERROR
    [request] = named(spans, "chat gpt-4o")
    assert attrs_of(request)["error.type"] == "invalid_request_error"


async def test_cancelled_turn_ends_every_span(traced: Traced) -> None:
    """A client that leaves mid-stream: the cancel path is recorded and every span ends."""
    events = traced.engine.run_turn(traced.chat_id, _turn("bye"))
    async for event in events:
        if event.type == "state_changed":
            break
    await events.aclose()  # type: ignore[attr-defined]
    spans = traced.spans()
    assert tree(spans, root_of(spans)) == ("turnstate.turn", (
        ("validate",), ("replay",), ("abort",)))
    root = root_of(spans)
    assert attrs_of(root)["turnstate.outcome"] == "cancelled"
    assert root.status.status_code is StatusCode.UNSET


def _turn(text: str, **kwargs: Any) -> Any:
    from tests.engine.support import make_turn

    return make_turn(text, **kwargs)


async def test_recovered_turn_is_traced(traced: Traced) -> None:
    """The recovery edge shows as cursor → replay with the lost request marked."""
    await traced.turn("one")
    traced.clear()
    traced.backend.push("openai", ScriptStep.call(("weather", {"city": "Oslo"})),
                        ScriptStep.reject_cursor("cursor_expired"), ScriptStep.reply("ok"))
    await traced.turn("two", recover_tool_results=True)
    names = [c[0] for c in traced.last_tree()[1]]
    assert names == ["validate", "cursor", "tool_iteration", "cursor", "replay", "persist"]
    turn = attrs_of(root_of(traced.spans()))
    assert turn["turnstate.degradation"] == "tool_result_cursor_loss"


# --- what never reaches an attribute ---------------------------------------------------

SECRET_KEY = "sk-turnstate-SECRET-key"
USER_TEXT = "please-keep-this-user-text-private"
PROMPT = "private-system-prompt-text"


def _all_values(spans: list[ReadableSpan]) -> list[str]:
    """Every span name and attribute value as text (sequences item by item)."""
    values: list[str] = [s.name for s in spans]
    for span in spans:
        for value in (span.attributes or {}).values():
            items = value if isinstance(value, tuple | list) else (value,)
            values += [str(item) for item in items]
    return values


def _appears(text: str, values: list[str]) -> bool:
    """``text`` in any value, as it is or escaped inside a JSON string."""
    escaped = json.dumps(text)[1:-1]
    return any(text in v or escaped in v for v in values)


@pytest.mark.parametrize("provider", ["openai", "gemini"])
async def test_no_key_cursor_or_text_in_attributes_by_default(provider: str) -> None:
    """Over real adapters and emulators: no API key, cursor, prompt, user text, tool output
    or model text in any attribute; with trace_content=True the texts appear."""
    from turnstate.emulators._emulated import EmulatedProviders
    from turnstate.providers._transport import AiohttpTransport

    model = {"openai": "gpt-4o", "gemini": "gemini-2.5-flash"}[provider]
    adapter_type: Any = {"openai": OpenAIResponsesAdapter,
                         "gemini": GeminiInteractionsAdapter}[provider]
    tracer_provider, exporter = in_memory_provider()
    async with EmulatedProviders([provider]) as stack, AiohttpTransport() as transport:
        adapter = adapter_type(base_url=stack.base_url(provider), api_key=SECRET_KEY)
        for content in (False, True):
            store = MemoryStore()
            engine = TurnEngine(store, {provider: adapter}, transport,
                                tracer_provider=tracer_provider, trace_content=content)
            chat = await store.create_chat(owner="o")
            env = Env(store=store, backend=ScriptedBackend(), engine=engine,
                      clock=FakeClock(), chat_id=chat.id)
            exporter.clear()
            await env.turn(USER_TEXT, provider=provider, model=model, prompt=PROMPT)
            outcome = await env.turn(f'[[call:weather {{"city": "Oslo"}}]] {USER_TEXT}',
                                     provider=provider, model=model, prompt=PROMPT,
                                     tools=(tool("weather"),))
            assert outcome.committed, outcome.final
            cursor = parse_envelope((await store.load_chat(chat.id)).last_provider_state).cursor
            seen = _all_values(list(exporter.get_finished_spans()))
            assert cursor and not _appears(cursor, seen) and not _appears(SECRET_KEY, seen)
            texts = [USER_TEXT, PROMPT, outcome.final.text, "Oslo"]  # Oslo: tool arguments
            assert [_appears(t, seen) for t in texts] == [content] * len(texts)
    tracer_provider.shutdown()


# --- when OpenTelemetry is imported ------------------------------------------------------

_TURN = """
import asyncio, sys
from turnstate.engine import TurnEngine, TurnInput
from turnstate.emulators._scripted import ScriptedBackend
from turnstate.storage import MemoryStore

async def main():
    store, backend = MemoryStore(), ScriptedBackend()
    engine = TurnEngine(store, backend.adapters(), backend, tracing=TRACING)
    chat = await store.create_chat(owner="o")
    turn = TurnInput(provider="openai", model="gpt-4o", system_prompt="s", user_text="hi")
    events = [e.type async for e in engine.run_turn(chat.id, turn)]
    assert events[-1] == "turn_completed", events
    print("opentelemetry" in sys.modules, engine.tracer is not None)

asyncio.run(main())
"""


@pytest.mark.parametrize(("tracing", "expected"), [
    ("None", "False False"), ("False", "False False"), ("True", "True True")])
def test_opentelemetry_is_imported_only_when_tracing_is_asked_for(
    tracing: str, expected: str
) -> None:
    """In a fresh interpreter a turn imports no OpenTelemetry unless tracing was asked
    for (the True case proves the check can see the import)."""
    code = _TURN.replace("TRACING", tracing)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


def test_auto_mode_follows_a_provider_the_application_set() -> None:
    """tracing=None traces once the application has set a global tracer provider."""
    code = _TURN.replace("TRACING", "None").replace(
        "async def main():", "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "trace.set_tracer_provider(TracerProvider())\n\nasync def main():")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True True"


def test_console_tracing_prints_the_turn_spans() -> None:
    """What ``turnstate serve --otel-console`` uses: console_tracing() installs a global
    provider (so the default engine traces) and its spans reach stdout by shutdown."""
    code = _TURN.replace("TRACING", "None").replace(
        "async def main():", "from turnstate.engine import console_tracing\n"
        "provider = console_tracing()\n\nasync def main():") + "provider.shutdown()\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert '"name": "turnstate.turn"' in result.stdout and '"name": "chat gpt-4o"' in result.stdout


async def test_a_turn_works_out_its_outcome_once(traced: Traced,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The turn span's status is read off its ``turnstate.outcome`` attribute, not worked
    out a second time from the path (issue 26: attributes computed once)."""
    from turnstate.engine import _tracing

    calls: list[str] = []
    counted = _tracing.outcome_of

    def outcome_of(*args: Any) -> str:
        calls.append(counted(*args))
        return calls[-1]

    monkeypatch.setattr(_tracing, "outcome_of", outcome_of)
    traced.backend.push("openai", ScriptStep.fail(400, "invalid_request_error"))
    await traced.turn("x")
    assert calls == ["provider_failed"]
    assert root_of(traced.spans()).status.status_code is StatusCode.ERROR
