"""OpenTelemetry spans for turns, recorded by the engine around the driver.

A traced turn is one ``turnstate.turn`` span with a child span per working state visited
(named after the state; the final ``done`` or ``aborted`` is the turn span's
``turnstate.outcome``, not a span) and, under each call state that sent a request, one
span per provider request following the OpenTelemetry GenAI conventions (``chat
{model}``, kind CLIENT, ``gen_ai.system``, ``gen_ai.request.model``,
``gen_ai.usage.*``); under each tool iteration, one ``execute_tool {name}`` span per
call that ran, over its own run (``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
``error.type`` ``tool_error`` for an error result, ``cancelled`` for a call a stop or a
cancel cut; the tool runner notes each call's times, ``run.tool_times``). The lifecycle hands
each turn's ``TurnSpans`` its progress (``observe`` between events, ``finish`` at the
end), which read the turn's recorded path: no state-machine callback and no driver
action does anything for tracing, and a request span is the logical call (transport
retries are inside it).

When tracing happens (``TurnEngine(tracing=..., tracer_provider=...)``):

* ``tracing=None`` (the default): only if the application has already imported
  OpenTelemetry and set a global tracer provider by the time the engine is built. The
  engine never imports ``opentelemetry`` itself in this mode, so without the ``otel``
  extra, or with it but unused, nothing is imported and nothing is paid.
* ``tracing=True`` or a ``tracer_provider``: imports ``opentelemetry-api`` (the ``otel``
  extra; ``ConfigurationError`` without it) and traces with the given provider or the
  global one (a later ``set_tracer_provider`` is followed).
* ``tracing=False``: never.

Never on a span by default: API keys, cursors (``gen_ai.response.id`` is only a redacted
marker), prompts, completions, tool arguments or results, error messages. With
``trace_content=True`` the request spans also carry ``gen_ai.system_instructions``,
``gen_ai.input.messages`` (what the request added: the user's text or the tool results)
and ``gen_ai.output.messages`` (text and tool calls), as JSON.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any

from turnstate.core._conversation import TextPart, ToolCallPart
from turnstate.core._errors import ConfigurationError
from turnstate.core._path import PathStep
from turnstate.engine._run import TurnRun
from turnstate.states._table import CALL_STATES, FINAL_STATES, State

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.trace import Span, Tracer, TracerProvider

TRACER_NAME = "turnstate"
REDACTED = "[redacted]"
ANSWERED = frozenset({"tool_calls", "completed"})
STATE_NAMED = {state.value: state for state in State}
"""Each ``State`` by its name: a dict lookup per step instead of an enum call (issue 26)."""
GEN_AI_SYSTEMS = {"openai": "openai", "gemini": "gcp.gemini", "anthropic": "anthropic",
                  "deepseek": "deepseek", "openai-compatible": "openai"}
"""``gen_ai.system`` per provider registry name (others are sent as they are named)."""


def turn_tracer(tracing: bool | None, tracer_provider: TracerProvider | None, *,
                trace_content: bool = False) -> TurnTracer | None:
    """The engine's tracer, or None when turns are not traced (see the module doc).

    Raises:
        ConfigurationError: tracing was asked for and ``opentelemetry-api`` is missing.
    """
    if tracing is False:
        return None
    if tracing is None and tracer_provider is None and not _global_provider_set():
        return None
    try:
        from opentelemetry import trace  # noqa: PLC0415 - optional, imported on demand
    except ImportError as exc:
        msg = "tracing needs OpenTelemetry: pip install 'turnstate[otel]'"
        raise ConfigurationError(msg) from exc
    provider = tracer_provider or trace.get_tracer_provider()
    return TurnTracer(provider.get_tracer(TRACER_NAME), trace_content=trace_content)


def _global_provider_set() -> bool:
    """The application imported OpenTelemetry and set a global tracer provider."""
    trace: Any = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return False
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def console_tracing() -> SdkTracerProvider:
    """Install (globally) and return an SDK tracer provider printing spans to stdout.

    For a person trying turnstate out (``turnstate serve --otel-console``); call
    ``shutdown()`` on the result at exit to flush the last spans.

    Raises:
        ConfigurationError: ``opentelemetry-sdk`` is not installed.
    """
    try:
        from opentelemetry import trace  # noqa: PLC0415
        from opentelemetry.sdk.trace import TracerProvider as SdkProvider  # noqa: PLC0415
        from opentelemetry.sdk.trace.export import (  # noqa: PLC0415
            BatchSpanProcessor,
            ConsoleSpanExporter,
        )
    except ImportError as exc:
        msg = "console tracing needs opentelemetry-sdk: pip install opentelemetry-sdk"
        raise ConfigurationError(msg) from exc
    provider = SdkProvider()
    provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(),
                                                   schedule_delay_millis=500))
    trace.set_tracer_provider(provider)
    return provider


class TurnTracer:
    """Makes each turn's ``TurnSpans`` (the lifecycle reports the turn's progress)."""

    def __init__(self, tracer: Tracer, *, trace_content: bool = False) -> None:
        from opentelemetry.trace import (  # noqa: PLC0415
            SpanKind,
            Status,
            StatusCode,
            set_span_in_context,
        )

        self.tracer, self.trace_content = tracer, trace_content
        # Looked up once per engine, not per turn.
        self.client_kind = SpanKind.CLIENT
        self.error_status = Status(StatusCode.ERROR)
        self.status = Status
        self.error_code = StatusCode.ERROR
        self.in_context = set_span_in_context

    def spans(self, run: TurnRun) -> TurnSpans:
        """The spans of ``run``: ``observe`` before each event it yields, ``finish``
        once (with the exception it raised, if any) when it ends."""
        return TurnSpans(self, run)


class TurnSpans:
    """The spans of one turn; ``observe`` catches up with the turn's path.

    A state's span is written when the state is left, with the time it was entered as
    its start and the trigger that left it as attributes, in one ``start_span`` (issue
    26: opening it on entry and setting its attributes on exit cost a second write);
    nothing but the provider request span is ever created under it, and that too only
    once the state is left. A final state (``done``, ``aborted``) is never left, takes
    no time and has nothing to say that the turn span's ``turnstate.outcome`` does not:
    it gets no span (issue 26: one span in six, for the overhead budget).
    """

    def __init__(self, owner: TurnTracer, run: TurnRun) -> None:
        tracer = owner.tracer
        self.owner, self.tracer, self.run, self.content = owner, tracer, run, owner.trace_content
        self.root = tracer.start_span("turnstate.turn", attributes={
            "turnstate.chat_id": run.lease.chat_id, "turnstate.turn_id": run.lease.turn_id,
            "turnstate.provider": run.turn.provider, "turnstate.model": run.turn.model})
        self.recording = self.root.is_recording()
        self.context = owner.in_context(self.root)
        self.seen = 0
        self.state: State | None = None
        self.name = ""
        self.started_ns = 0
        self.requests_before = self.bytes_before = 0
        if self.recording:
            self._open(run.current.value)

    def observe(self) -> None:
        path = self.run.machine_model.path
        if not self.recording or len(path) == self.seen:
            return
        for step in path[self.seen:]:
            self._close(step)
            self._open(step.dest)
        self.seen = len(path)

    def _open(self, name: str) -> None:
        state = STATE_NAMED[name]
        if state in FINAL_STATES:
            self.state = None
            return
        self.state, self.name = state, name
        self.started_ns = time.time_ns()
        self.requests_before = self.run.stats.requests
        self.bytes_before = self.run.stats.request_bytes

    def _state_span(self, attributes: dict[str, Any]) -> Span:
        assert self.state is not None
        return self.tracer.start_span(self.name, context=self.context,
                                      start_time=self.started_ns, attributes=attributes)

    def _close(self, step: PathStep) -> None:
        if self.state is None:
            return
        exit_attributes = {"turnstate.trigger": step.trigger}
        if step.reason is not None:
            exit_attributes["turnstate.reason"] = step.reason
        span = self._state_span(exit_attributes)
        if self.state in CALL_STATES and self.run.stats.requests > self.requests_before:
            self._request_span(step, span)
        elif self.state is State.TOOL_ITERATION:
            self._tool_spans(span)
        span.end()
        self.state = None

    def _tool_spans(self, state_span: Span) -> None:
        """One ``execute_tool {name}`` span per call the iteration ran (the GenAI
        conventions' ``gen_ai.operation.name``, ``gen_ai.tool.name``, ``.call.id``,
        ``.type``), each over its own run (``run.tool_times``: from when it got a slot
        of ``max_concurrent_tools`` to its result, so parallel calls overlap); a call
        whose result is an error (an exception, a timeout, arguments off the schema) has
        ``error.type`` ``tool_error``, one a stop or a cancel cut ``cancelled``, and an
        error status. A call that never started (its iteration was cut while it waited
        for a slot) has none."""
        context = self.owner.in_context(state_span)
        for timed in self.run.tool_times:
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": timed.name,
                "gen_ai.tool.call.id": timed.call_id, "gen_ai.tool.type": "function"}
            if timed.error is not None:
                attributes["error.type"] = timed.error
            span = self.tracer.start_span(f"execute_tool {timed.name}", context=context,
                                          start_time=timed.start_ns, attributes=attributes)
            if timed.error is not None:
                span.set_status(self.owner.error_status)
            span.end(end_time=timed.end_ns)

    def _request_span(self, step: PathStep, state_span: Span) -> None:
        run = self.run
        attributes = request_attributes(run, step.source)
        attributes["turnstate.request_bytes"] = run.stats.request_bytes - self.bytes_before
        answered = step.trigger in ANSWERED and run.last_response is not None
        if answered:
            attributes.update(response_attributes(run))
            if self.content:
                attributes.update(content_attributes(run))
        else:
            attributes["error.type"] = step.reason or step.trigger
        span = self.tracer.start_span(
            f"chat {run.turn.model}", context=self.owner.in_context(state_span),
            kind=self.owner.client_kind, start_time=self.started_ns, attributes=attributes)
        if not answered:
            span.set_status(self.owner.error_status)
        span.end()

    def finish(self, error: Exception | None) -> None:
        """Catch up with the path (a cancelled turn's last steps), end every span."""
        if self.recording:
            self.observe()
            if self.state is not None:  # interrupted inside a state: its span, unfinished
                span = self._state_span({})
                if self.state is State.TOOL_ITERATION:  # and the calls that ran in it
                    self._tool_spans(span)
                span.end()
                self.state = None
            attributes = turn_attributes(self.run, error)
            self.root.set_attributes(attributes)
            if error is not None:
                self.root.record_exception(error)
            outcome = attributes["turnstate.outcome"]
            if outcome not in {"committed", "cancelled"}:
                self.root.set_status(self.owner.status(self.owner.error_code, outcome))
        self.root.end()


def outcome_of(run: TurnRun, error: Exception | None) -> str:
    """``committed``, the abort reason, or ``error`` when the turn raised."""
    if error is not None:
        return "error"
    if run.current is State.DONE:
        return "committed"
    into_abort = [s for s in run.machine_model.path if s.dest == State.ABORT.value]
    return into_abort[-1].trigger if into_abort else "unfinished"


def turn_attributes(run: TurnRun, error: Exception | None) -> dict[str, Any]:
    stats, usage = run.stats, run.stats.usage
    attributes: dict[str, Any] = {
        "turnstate.outcome": outcome_of(run, error),
        "turnstate.requests": stats.requests,
        "turnstate.request_bytes": stats.request_bytes,
        "turnstate.retries": stats.retries,
        "turnstate.tool_calls": stats.tool_calls,
        "turnstate.cache_hit_tokens": usage.cache_hit_tokens or usage.cached_input_tokens,
        "turnstate.cache_write_tokens": usage.cache_write_tokens,
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cached_input_tokens,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
    }
    if stats.cost is not None:  # a string: exact, and span attributes take no Decimal
        attributes["turnstate.cost_usd"] = str(stats.cost.total)
    if run.strategy is not None:
        attributes["turnstate.strategy"] = run.strategy.value
    if run.degradation is not None:
        attributes["turnstate.degradation"] = run.degradation
    return attributes


def request_attributes(run: TurnRun, state: str) -> dict[str, Any]:
    provider = run.turn.provider
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": GEN_AI_SYSTEMS.get(provider, provider),
        "gen_ai.request.model": run.turn.model,
        "turnstate.strategy": state,
        "turnstate.iteration": run.facts.iterations_done,
    }


def response_attributes(run: TurnRun) -> dict[str, Any]:
    response = run.last_response
    assert response is not None
    attributes: dict[str, Any] = {
        "gen_ai.usage.input_tokens": response.usage.input_tokens,
        "gen_ai.usage.output_tokens": response.usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": response.usage.cached_input_tokens,
        "gen_ai.usage.cache_creation.input_tokens": response.usage.cache_write_tokens,
    }
    if response.finish_reason:
        attributes["gen_ai.response.finish_reasons"] = [response.finish_reason]
    if response.response_id:
        attributes["gen_ai.response.id"] = REDACTED
    return attributes


def content_attributes(run: TurnRun) -> dict[str, str]:
    """Prompt and completion text (only with ``trace_content=True``)."""
    call, response = run.last_call, run.last_response
    assert call is not None and response is not None
    sent: list[dict[str, Any]] = [{"role": "tool", "id": r.call_id, "content": r.output}
                                  for r in call.tool_results]
    if not call.tool_results:
        sent.append({"role": "user", "content": call.user_text})
    said: list[dict[str, Any]] = [
        {"type": "text", "content": p.text} if isinstance(p, TextPart) else
        {"type": "tool_call", "id": p.call_id, "name": p.name, "arguments": p.arguments}
        for p in response.parts if isinstance(p, TextPart | ToolCallPart)]
    return {"gen_ai.system_instructions": call.system_prompt,
            "gen_ai.input.messages": json.dumps(sent),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": said}])}
