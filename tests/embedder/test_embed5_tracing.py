"""A tool that fails is visible in a trace (embed5). Before, a traced turn's tool
iteration was one ``tool_iteration`` span with nothing about its calls: a tool that
raised, timed out or got arguments off its schema left no mark in the trace (the turn
committed, the turn span counted ``turnstate.tool_calls``). Each call that ran is now an
``execute_tool {name}`` span (the GenAI conventions), an error result one with
``error.type`` ``tool_error`` and an error status."""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from turnstate import AiohttpTransport, MemoryStore, Tool, ToolSpec, TurnEngine, TurnInput
from turnstate.emulators import EmulatedProviders
from turnstate.testing import emulated_providers, turn_events

__all__ = ["emulated_providers"]  # the fixture, imported for pytest


async def _fine(_arguments: dict[str, Any]) -> str:
    return "fine"


async def _raises(_arguments: dict[str, Any]) -> str:
    raise RuntimeError("broken")


async def _hangs(_arguments: dict[str, Any]) -> str:
    await asyncio.Event().wait()
    return "never"


TOOLS = (Tool(spec=ToolSpec(name="fine"), handler=_fine),
         Tool(spec=ToolSpec(name="raises"), handler=_raises),
         Tool(spec=ToolSpec(name="hangs"), handler=_hangs, timeout=0.01))


async def test_each_tool_call_is_a_span_and_a_failed_one_says_so(
        emulated_providers: EmulatedProviders) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with AiohttpTransport() as transport:
        engine = TurnEngine(MemoryStore(), emulated_providers.adapters, transport,
                            tracer_provider=provider)
        chat = await engine.store.create_chat(owner="o")
        turn = TurnInput(provider="anthropic", model="claude-sonnet-4-6", system_prompt="s",
                         user_text="[[call:fine {}]] [[call:raises {}]] [[call:hangs {}]] go",
                         tools=TOOLS)
        events = await turn_events(engine.run_turn(chat.id, turn))
    assert events[-1].type == "turn_completed"
    spans = exporter.get_finished_spans()
    iteration = next(s for s in spans if s.name == "tool_iteration")
    tools = {s.name: s for s in spans if s.name.startswith("execute_tool ")}
    assert set(tools) == {"execute_tool fine", "execute_tool raises", "execute_tool hangs"}
    for name, span in tools.items():
        assert span.parent is not None and span.parent.span_id == iteration.context.span_id
        attributes = dict(span.attributes or {})
        assert attributes["gen_ai.tool.name"] == name.split()[1]
        failed = name != "execute_tool fine"
        assert (attributes.get("error.type") == "tool_error") is failed
        assert (span.status.status_code is StatusCode.ERROR) is failed
        assert "broken" not in str(attributes)  # no tool output without trace_content
