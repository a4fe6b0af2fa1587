"""An in-process scripted provider for tests and benchmarks: no HTTP at all.

``ScriptedBackend`` is a ``Transport`` that answers requests built by
``ScriptedAdapter`` (one per provider name, durable or stateless as the registry
says) from a script of ``ScriptStep`` values, like httpx's ``MockTransport``. It keeps
the cursors it issued, so an expired or unknown cursor is rejected as a real durable
provider would. Steps can answer text (in several deltas), reasoning, tool calls
(parallel too), reject the cursor, fail transiently or fatally, send a malformed frame
or an in-stream error, and stream slowly: stop after N events until a test opens a gate.

Wire format (private to this module): the request body is the call as JSON; the
response is SSE events ``reasoning``, ``text``, ``tool_call``, ``error`` and ``done``.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncGenerator, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from turnstate.core._conversation import (
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from turnstate.core._decisions import TurnContext
from turnstate.core._envelope import ContinuationEnvelope, Mode
from turnstate.core._errors import (
    CursorRejected,
    FatalProviderError,
    ProviderError,
    ProviderProtocolError,
)
from turnstate.core._json import JsonObject, compact_json
from turnstate.core._registry import DEFAULT_REGISTRY, Registry
from turnstate.emulators._base import Item, append_parts, items_from_messages
from turnstate.providers._envelopes import standard_envelope
from turnstate.providers._errors import context_length_error, error_fields, status_error
from turnstate.providers._frames import load_frame
from turnstate.providers._protocol import (
    ErrorClassifier,
    HttpRequest,
    ProviderCall,
    ProviderEvent,
    ProviderResponse,
    ReasoningDelta,
    SseEvent,
    TextDelta,
)


@attrs.frozen(kw_only=True)
class ScriptStep:
    """One scripted answer. Build them with the class methods."""

    kind: str
    text: str = ""
    reasoning: str | None = None
    calls: tuple[tuple[str, str], ...] = ()
    status: int = 500
    code: str = "server_error"
    message: str = "scripted failure"
    chunks: int = 1
    gate: asyncio.Event | None = attrs.field(default=None, eq=False)
    gate_after: int = 0

    @classmethod
    def reply(cls, text: str = "ok", *, reasoning: str | None = None, chunks: int = 1,
              gate: asyncio.Event | None = None, gate_after: int = 1) -> ScriptStep:
        return cls(kind="reply", text=text, reasoning=reasoning, chunks=chunks, gate=gate,
                   gate_after=gate_after)

    @classmethod
    def call(cls, *calls: tuple[str, Mapping[str, Any] | str], text: str = "",
             reasoning: str | None = None) -> ScriptStep:
        rendered = tuple((name, args if isinstance(args, str) else compact_json(dict(args)))
                         for name, args in calls)
        return cls(kind="reply", text=text, reasoning=reasoning, calls=rendered)

    @classmethod
    def reject_cursor(cls, reason: str = "cursor_expired") -> ScriptStep:
        return cls(kind="reject_cursor", code=reason, status=404)

    @classmethod
    def fail(cls, status: int = 500, code: str = "server_error", *,
             message: str = "scripted failure") -> ScriptStep:
        return cls(kind="fail", status=status, code=code, message=message)

    @classmethod
    def malformed(cls) -> ScriptStep:
        return cls(kind="malformed")

    @classmethod
    def stream_error(cls, code: str = "server_error") -> ScriptStep:
        return cls(kind="stream_error", code=code)


@attrs.frozen(kw_only=True)
class ScriptedRequest:
    provider: str
    body: JsonObject
    size: int


class ScriptedAdapter:
    """The sans-IO codec of the scripted wire format, for one provider name."""

    def __init__(self, provider: str, *, registry: Registry = DEFAULT_REGISTRY) -> None:
        self._provider = provider
        self.mode = registry.provider(provider).mode

    @property
    def provider(self) -> str:
        return self._provider

    def build_request(self, call: ProviderCall) -> HttpRequest:
        body = {
            "model": call.model.name,
            "strategy": call.strategy.value,
            "cursor": call.cursor,
            "system": call.system_prompt,
            "tools": [t.name for t in call.tools],
            "history": [attrs.asdict(item) for item in items_from_messages(call.history)],
            "user": call.user_text,
            "turn": [attrs.asdict(item) for item in _turn_items(call)],
            "toolResults": [attrs.asdict(r) for r in call.tool_results],
            "loop": list(call.loop_messages),
            "iteration": call.iteration,
        }
        return HttpRequest(method="POST", url=f"scripted://{self._provider}/turn",
                           headers={"content-type": "application/json"},
                           body=compact_json(body).encode("utf-8"), provider=self._provider)

    def stream_parser(self) -> ScriptedParser:
        return ScriptedParser(self._provider)

    def classify_error(self, status: int, headers: Mapping[str, str], body: bytes) -> ProviderError:
        fields = error_fields(body)
        code, detail = fields.get("code"), str(fields.get("message", "scripted failure"))
        if code in {"cursor_expired", "cursor_invalid"}:
            return CursorRejected(self._provider, detail, reason=str(code), status=status,
                                  code=str(code))
        if code == "context_length_exceeded":
            return context_length_error(self._provider, detail, status=status, code=code)
        return status_error(self._provider, status, headers, detail,
                            code if isinstance(code, str) else None)

    def extend_loop(self, call: ProviderCall, response: ProviderResponse,
                    results: Sequence[ToolResultPart]) -> tuple[JsonObject, ...]:
        if self.mode.durable:
            return ()
        assistant = {"role": "assistant",
                     "calls": [[c.call_id, c.name, c.arguments] for c in response.tool_calls],
                     "text": "".join(p.text for p in response.parts if isinstance(p, TextPart))}
        tool = [{"role": "tool", "callId": r.call_id, "output": r.output} for r in results]
        return (*call.loop_messages, assistant, *tool)

    def envelope(self, ctx: TurnContext, response: ProviderResponse, *,
                 loop_messages: tuple[JsonObject, ...], now: datetime,
                 covers_seq: int) -> ContinuationEnvelope:
        return standard_envelope(ctx, self.mode, response, loop_messages=loop_messages,
                                 now=now, covers_seq=covers_seq)


def _turn_items(call: ProviderCall) -> list[Item]:
    items: list[Item] = []
    append_parts(items, "assistant", call.turn_parts)
    return items


class ScriptedParser:
    """Assembles a ``ProviderResponse`` from the scripted events."""

    def __init__(self, provider: str) -> None:
        self._provider = provider
        self._parts: list[TextPart | ReasoningPart | ToolCallPart] = []
        self._response: ProviderResponse | None = None

    @property
    def done(self) -> bool:
        return self._response is not None

    def feed(self, event: SseEvent) -> Sequence[ProviderEvent]:
        data = load_frame(self._provider, event)
        if event.event == "text":
            self._parts.append(TextPart(text=data["text"]))
            return [TextDelta(text=data["text"])]
        if event.event == "reasoning":
            self._parts.append(ReasoningPart(provider=self._provider, model="", kind="thinking",
                                             text=data["text"]))
            return [ReasoningDelta(text=data["text"])]
        if event.event == "tool_call":
            self._parts.append(ToolCallPart(call_id=data["id"], name=data["name"],
                                            arguments=data["arguments"]))
        elif event.event == "error":
            raise FatalProviderError(self._provider, str(data.get("message")),
                                     code=str(data.get("code")))
        elif event.event == "done":
            self._response = ProviderResponse(
                response_id=data["id"], parts=_merge_text(self._parts),
                usage=Usage(input_tokens=data["inputTokens"], output_tokens=data["outputTokens"]),
                finish_reason="tool_calls" if any(isinstance(p, ToolCallPart)
                                                  for p in self._parts) else "stop",
            )
        return []

    def finish(self) -> ProviderResponse:
        if self._response is None:
            msg = "the stream ended before its done event"
            raise ProviderProtocolError(self._provider, msg)
        return self._response


def _merge_text(parts: list[TextPart | ReasoningPart | ToolCallPart]) -> tuple[Any, ...]:
    merged: list[Any] = []
    for part in parts:
        last = merged[-1] if merged else None
        if isinstance(part, TextPart) and isinstance(last, TextPart):
            merged[-1] = TextPart(text=last.text + part.text)
        elif isinstance(part, ReasoningPart) and isinstance(last, ReasoningPart):
            merged[-1] = attrs.evolve(last, text=last.text + part.text)
        else:
            merged.append(part)
    return tuple(merged)


class ScriptedBackend:
    """A ``Transport`` serving every ``ScriptedAdapter`` from per-provider scripts."""

    def __init__(self, *, registry: Registry = DEFAULT_REGISTRY) -> None:
        self.registry = registry
        self.scripts: dict[str, deque[ScriptStep]] = {}
        self.requests: list[ScriptedRequest] = []
        self.cursors: set[str] = set()
        self._issued = 0
        self._arrival = asyncio.Event()
        self.response_ids: list[str] = []

    async def wait_for_requests(self, count: int) -> ScriptedRequest:
        """Wait until ``count`` requests have arrived in total; return the latest."""
        while len(self.requests) < count:
            self._arrival.clear()
            await self._arrival.wait()
        return self.requests[-1]

    def adapter(self, provider: str) -> ScriptedAdapter:
        return ScriptedAdapter(provider, registry=self.registry)

    def adapters(self, *providers: str) -> dict[str, ScriptedAdapter]:
        names = providers or tuple(self.registry.providers)
        return {name: self.adapter(name) for name in names}

    def push(self, provider: str, *steps: ScriptStep) -> None:
        self.scripts.setdefault(provider, deque()).extend(steps)

    def expire(self, cursor: str | None) -> None:
        self.cursors.discard(cursor or "")

    def expire_all(self) -> None:
        self.cursors.clear()

    async def before_restart(self, restarts: int, error: ProviderError) -> bool:
        """Scripted calls are never restarted: a script step is one answer."""
        return False

    async def stream(self, request: HttpRequest,
                     classify: ErrorClassifier) -> AsyncGenerator[SseEvent, None]:
        body = json.loads(request.body)
        self.requests.append(ScriptedRequest(provider=request.provider, body=body,
                                             size=len(request.body)))
        self._arrival.set()
        cursor = body.get("cursor")
        if cursor is not None and cursor not in self.cursors:
            raise classify(404, {}, _error_body("cursor_expired", f"no cursor {cursor}"))
        step = self._next_step(request.provider, body)
        if step.kind in {"fail", "reject_cursor"}:
            raise classify(step.status, {}, _error_body(step.code, step.message))
        async for event in self._events(step, request.provider, len(request.body)):
            yield event

    def _next_step(self, provider: str, body: JsonObject) -> ScriptStep:
        script = self.scripts.get(provider)
        if script:
            return script.popleft()
        return ScriptStep.reply("done" if body.get("toolResults") or body.get("loop") else "ok")

    async def _events(self, step: ScriptStep, provider: str,
                      size: int) -> AsyncGenerator[SseEvent, None]:
        if step.kind == "malformed":
            yield SseEvent(event="text", data='{"text": "unterminated')
            return
        if step.kind == "stream_error":
            yield SseEvent(event="error", data=compact_json({"code": step.code,
                                                             "message": "scripted"}))
            return
        for index, event in enumerate(self._reply_events(step, provider, size)):
            if step.gate is not None and index == step.gate_after:
                await step.gate.wait()
            yield event

    def _reply_events(self, step: ScriptStep, provider: str, size: int) -> list[SseEvent]:
        events = []
        if step.reasoning:
            events.append(SseEvent(event="reasoning", data=compact_json({"text": step.reasoning})))
        for piece in _split(step.text, step.chunks):
            events.append(SseEvent(event="text", data=compact_json({"text": piece})))
        for name, arguments in step.calls:
            self._issued += 1
            events.append(SseEvent(event="tool_call", data=compact_json(
                {"id": f"call_{self._issued:06d}", "name": name, "arguments": arguments})))
        self._issued += 1
        response_id = f"scr_{self._issued:06d}"
        self.response_ids.append(response_id)
        if self.registry.provider(provider).mode is not Mode.STATELESS_LOOP:
            self.cursors.add(response_id)
        events.append(SseEvent(event="done", data=compact_json(
            {"id": response_id, "inputTokens": size // 4, "outputTokens": len(step.text) // 4})))
        return events


def _split(text: str, chunks: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, chunks)))
    return [text[i:i + size] for i in range(0, len(text), size)]


def _error_body(code: str, message: str) -> bytes:
    return compact_json({"error": {"code": code, "message": message}}).encode("utf-8")
