"""What every provider emulator shares: faults, the request log, the scripted model, SSE.

An emulator is an aiohttp application that speaks one provider's real wire format. The
pieces here are protocol-neutral:

* ``FaultPlan``: faults queued by a test, each consumed by the next request (an HTTP
  status with a body, a 429 with ``Retry-After``, a stream cut after N events, a
  malformed frame after N events, a delay, or a gate a test opens).
* ``RecordedRequest``: every request received, API key redacted.
* ``ScriptedModel``: a deterministic "model" that answers from the conversation,
  following directives written in the user's text (see ``Directive``).
* ``EmulatorBase.send_events``: writes SSE frames honouring the request's fault.
* ``EmulatorServer``: serves an app on a free loopback port.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from aiohttp import web

from turnstate.engine._conversation import (
    Message,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from turnstate.engine._json import JsonObject, canonical_json, compact_json

REDACTED_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key", "api-key"})


@attrs.frozen(kw_only=True)
class Fault:
    """One injected fault, applied to the next request the emulator receives.

    Attributes:
        status: answer with this HTTP status and ``body`` instead of the real reply.
        body: the error body (a JSON object, or raw text).
        headers: extra response headers (``Retry-After`` for a 429).
        cut_after: stream only the first N events, then drop the connection.
        malformed_after: after N events, send one frame whose data is not JSON.
        delay: seconds to wait before answering (manual runs and the demo).
        gate: wait until this event is set before answering (deterministic tests).
        path_contains: apply only to a request whose path contains this text.
    """

    status: int | None = None
    body: JsonObject | str | None = None
    headers: Mapping[str, str] = attrs.field(factory=dict)
    cut_after: int | None = None
    malformed_after: int | None = None
    delay: float = 0.0
    gate: asyncio.Event | None = attrs.field(default=None, eq=False)
    path_contains: str | None = None

    @classmethod
    def rate_limited(cls, retry_after: float = 1.0, body: JsonObject | None = None) -> Fault:
        return cls(status=429, headers={"Retry-After": f"{retry_after:g}"},
                   body=body or {"error": {"message": "Rate limit reached", "type": "requests",
                                           "code": "rate_limit_exceeded", "param": None}})


class FaultPlan:
    """Faults queued by a test, consumed in order by the requests that match them."""

    def __init__(self) -> None:
        self._queue: deque[Fault] = deque()

    def push(self, *faults: Fault) -> None:
        self._queue.extend(faults)

    def clear(self) -> None:
        self._queue.clear()

    def take(self, path: str) -> Fault | None:
        for index, fault in enumerate(self._queue):
            if fault.path_contains is None or fault.path_contains in path:
                del self._queue[index]
                return fault
        return None

    def __len__(self) -> int:
        return len(self._queue)


@attrs.frozen(kw_only=True)
class RecordedRequest:
    """A request as received. ``json`` is the decoded body (None when it was not JSON)."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes
    json: Any

    @property
    def size(self) -> int:
        return len(self.body)


# --- the scripted model --------------------------------------------------------------

_DIRECTIVE = re.compile(r"\[\[(\w+)(?::([^\]\s*]+))?(?:\*(\d+))?(?:\s+(\{.*?\}))?\]\]")


@attrs.frozen(kw_only=True)
class Directive:
    """An instruction to the scripted model, written in the user's text.

    ``[[call:NAME]]`` calls tool NAME with arguments derived from its schema;
    ``[[call:NAME {"city": "Paris"}]]`` with these arguments; ``[[call:NAME*3]]`` three
    parallel calls. ``[[think]]`` adds reasoning. ``[[rounds:N]]`` repeats the calls for
    N tool iterations before answering (default 1). ``[[say:TEXT]]`` fixes the reply.
    """

    name: str
    value: str | None = None
    count: int = 1
    arguments: JsonObject | None = None


def parse_directives(text: str) -> tuple[Directive, ...]:
    found = []
    for match in _DIRECTIVE.finditer(text):
        name, value, count, args = match.groups()
        try:
            arguments = json.loads(args) if args else None
        except ValueError:
            arguments = None
        found.append(Directive(name=name, value=value, count=int(count or 1),
                               arguments=arguments if isinstance(arguments, dict) else None))
    return tuple(found)


@attrs.frozen(kw_only=True)
class Item:
    """One item of a conversation in neutral form, as an emulator reconstructs it.

    ``kind`` is ``user``, ``assistant``, ``tool_call`` or ``tool_result``.
    """

    kind: str
    text: str = ""
    call_id: str = ""
    name: str = ""


@attrs.frozen(kw_only=True)
class ScriptedCall:
    name: str
    arguments: str


@attrs.frozen(kw_only=True)
class Reply:
    """What the scripted model says: optional reasoning, text and tool calls."""

    text: str
    reasoning: str | None = None
    calls: tuple[ScriptedCall, ...] = ()


def example_arguments(schema: Mapping[str, Any] | None) -> JsonObject:
    """Deterministic arguments that satisfy a simple JSON schema's required properties."""
    properties = (schema or {}).get("properties") or {}
    out: JsonObject = {}
    for key, prop in properties.items():
        out[key] = _example_value(prop if isinstance(prop, Mapping) else {}, key)
    return out


def _example_value(prop: Mapping[str, Any], key: str) -> Any:
    if prop.get("enum"):
        return prop["enum"][0]
    kind = prop.get("type")
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.5
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return example_arguments(prop)
    return f"{key}-value"


class ScriptedModel:
    """A deterministic model: answers are derived from the conversation alone.

    Tests may also queue explicit ``Reply`` values with ``push``; they win over directives.
    """

    def __init__(self) -> None:
        self._queued: deque[Reply] = deque()

    def push(self, *replies: Reply) -> None:
        self._queued.extend(replies)

    def respond(self, items: Sequence[Item], tools: Mapping[str, Mapping[str, Any]]) -> Reply:
        """Reply to ``items`` given the ``tools`` offered (name → JSON schema)."""
        if self._queued:
            return self._queued.popleft()
        user_index = max((i for i, it in enumerate(items) if it.kind == "user"), default=-1)
        user_text = items[user_index].text if user_index >= 0 else ""
        after = items[user_index + 1:]
        rounds_done = _tool_rounds(after)
        directives = parse_directives(user_text)
        reasoning = _reasoning(directives, user_text, rounds_done)
        wanted = _rounds_wanted(directives)
        calls = [d for d in directives if d.name == "call" and d.value in tools]
        if calls and rounds_done < wanted:
            return Reply(text="", reasoning=reasoning,
                         calls=tuple(_calls(calls, tools, rounds_done)))
        return Reply(text=_answer(directives, user_text, after), reasoning=reasoning)


def _tool_rounds(items: Sequence[Item]) -> int:
    rounds, previous = 0, ""
    for item in items:
        if item.kind == "tool_result" and previous != "tool_result":
            rounds += 1
        previous = item.kind
    return rounds


def _rounds_wanted(directives: Sequence[Directive]) -> int:
    for d in directives:
        if d.name == "rounds" and d.value and d.value.isdigit():
            return int(d.value)
    return 1


def _reasoning(directives: Sequence[Directive], user_text: str, rounds: int) -> str | None:
    if not any(d.name == "think" for d in directives):
        return None
    return f"Thinking about {_plain(user_text)[:40]!r} (round {rounds})."


def _calls(
    directives: Sequence[Directive], tools: Mapping[str, Mapping[str, Any]], rounds: int
) -> list[ScriptedCall]:
    out = []
    for d in directives:
        schema = tools[d.value or ""]
        arguments = d.arguments if d.arguments is not None else example_arguments(schema)
        for _ in range(d.count):
            out.append(ScriptedCall(name=d.value or "", arguments=compact_json(arguments)))
    return out


def _plain(text: str) -> str:
    return _DIRECTIVE.sub("", text).strip()


def _answer(directives: Sequence[Directive], user_text: str, after: Sequence[Item]) -> str:
    for d in directives:
        if d.name == "say" and d.value:
            return d.value.replace("_", " ")
    results = [it for it in after if it.kind == "tool_result"]
    if results:
        summary = "; ".join(f"{it.name or it.call_id}={it.text[:40]}" for it in results)
        return f"Tool results: {summary}."
    return f"You said: {_plain(user_text)[:120]}"


# --- serving ---------------------------------------------------------------------------


class EmulatorBase:
    """Request log, fault plan, scripted model and SSE writing; subclasses add routes."""

    def __init__(self) -> None:
        self.faults = FaultPlan()
        self.requests: list[RecordedRequest] = []
        self.model = ScriptedModel()

    def app(self) -> web.Application:
        """The aiohttp application; subclasses override ``routes``."""
        application = web.Application()
        application.add_routes(self.routes())
        return application

    def routes(self) -> list[web.RouteDef]:
        raise NotImplementedError

    async def record(self, request: web.Request) -> RecordedRequest:
        body = await request.read()
        try:
            decoded = json.loads(body) if body else None
        except ValueError:
            decoded = None
        headers = {
            k.lower(): ("<redacted>" if k.lower() in REDACTED_HEADERS else v)
            for k, v in request.headers.items()
        }
        recorded = RecordedRequest(method=request.method, path=request.path, headers=headers,
                                   body=body, json=decoded)
        self.requests.append(recorded)
        return recorded

    async def apply_fault(self, request: web.Request) -> tuple[Fault | None, web.Response | None]:
        """Take the request's fault; an HTTP-status fault becomes the response."""
        fault = self.faults.take(request.path)
        if fault is None:
            return None, None
        if fault.gate is not None:
            await fault.gate.wait()
        if fault.delay:
            await asyncio.sleep(fault.delay)
        if fault.status is None:
            return fault, None
        body = fault.body if isinstance(fault.body, str) else compact_json(fault.body or {})
        return fault, web.Response(status=fault.status, text=body,
                                   content_type="application/json", headers=fault.headers)

    async def send_events(
        self,
        request: web.Request,
        events: Sequence[tuple[str | None, str]],
        fault: Fault | None,
    ) -> web.StreamResponse:
        """Stream ``(event name, data)`` pairs as SSE, applying cut and malformed faults."""
        response = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        for index, (name, data) in enumerate(events):
            if fault and fault.malformed_after is not None and index == fault.malformed_after:
                await response.write(b'data: {"type": "broken", \n\n')
                return response
            if fault and fault.cut_after is not None and index == fault.cut_after:
                # Drop the connection mid-stream, as a network failure would.
                if request.transport is not None:
                    request.transport.close()
                return response
            frame = (f"event: {name}\n" if name else "") + f"data: {data}\n\n"
            await response.write(frame.encode("utf-8"))
        await response.write_eof()
        return response


class RefusedRequest(Exception):
    """A request the emulated API refuses; ``response()`` is the real error response."""

    def __init__(self, status: int, body: JsonObject, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = body

    def response(self) -> web.Response:
        return web.json_response(self.body, status=self.status)


class ChainedEmulator(EmulatorBase):
    """An emulator of a provider that keeps conversations server-side, chained by id.

    ``chains`` maps each stored id to an object with a ``conversation`` (neutral items);
    the test API (``conversation_for``, ``stored``, ``expire``, ``evict_all``) is the same
    for every durable provider.
    """

    def __init__(self) -> None:
        super().__init__()
        self.chains: dict[str, Any] = {}
        self._expired: set[str] = set()
        self._counters: dict[str, itertools.count[int]] = {}

    def conversation_for(self, cursor: str) -> list[Item]:
        """The neutral conversation ``cursor`` stands for (expired ones included).

        Raises:
            KeyError: nothing was ever stored under this id.
        """
        return list(self.chains[cursor].conversation)

    def stored(self, cursor: str) -> bool:
        """True while ``cursor`` can be chained on."""
        return cursor in self.chains and cursor not in self._expired

    def expire(self, cursor: str) -> None:
        """Forget ``cursor``, as the provider does after its retention period."""
        self._expired.add(cursor)

    def evict_all(self) -> None:
        """Everything stored expires at once."""
        self._expired.update(self.chains)

    def next_number(self, name: str) -> int:
        """1, 2, 3, ... per ``name``: deterministic ids."""
        return next(self._counters.setdefault(name, itertools.count(1)))

    async def _create(self, request: web.Request) -> web.StreamResponse:
        """The create endpoint: record, apply the fault, check, answer (streamed or not)."""
        recorded = await self.record(request)
        fault, faulted = await self.apply_fault(request)
        if faulted is not None:
            return faulted
        try:
            self._check_auth(request)
            turn = self._prepare(recorded)
        except RefusedRequest as error:
            return error.response()
        reply = self.model.respond(turn.conversation, turn.tools)
        body = self._respond(turn, reply)
        if turn.body.get("stream") is True:
            return await self.send_events(request, self._stream_events(body), fault)
        return web.json_response(body)

    # The protocol-specific steps of ``_create``.
    def _check_auth(self, request: web.Request) -> None:
        raise NotImplementedError

    def _prepare(self, recorded: RecordedRequest) -> Any:
        raise NotImplementedError

    def _respond(self, turn: Any, reply: Reply) -> JsonObject:
        raise NotImplementedError

    def _stream_events(self, body: JsonObject) -> list[tuple[str | None, str]]:
        raise NotImplementedError


class EmulatorServer:
    """Serves an emulator on 127.0.0.1 (a free port unless one is given)."""

    def __init__(self, emulator: EmulatorBase, *, port: int = 0) -> None:
        self.emulator = emulator
        self._port = port
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> EmulatorServer:
        self._runner = web.AppRunner(self.emulator.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self._port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> EmulatorServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


# --- comparing a cursor's conversation with the committed history ------------------------


def canonical_arguments(text: str) -> str:
    """Tool-call arguments in canonical JSON (or the raw text if it is not JSON)."""
    try:
        return canonical_json(json.loads(text))
    except ValueError:
        return text


def items_from_messages(messages: Sequence[Message]) -> list[Item]:
    """The committed history in the neutral form emulators report for a cursor.

    User text becomes ``user`` items; an assistant message's parts become ``assistant``
    (consecutive text parts joined), ``tool_call`` (arguments canonicalised) and
    ``tool_result`` items in order; assistant text that follows assistant text (within a
    message or across consecutive assistant messages) is joined into one item.
    Reasoning and transition parts carry no conversation and are left out.
    """
    items: list[Item] = []
    for message in messages:
        kind = "user" if message.role == Role.USER else "assistant"
        text: list[str] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                text.append(part.text)
                continue
            if isinstance(part, (ToolCallPart, ToolResultPart)) and text:
                append_item(items, Item(kind=kind, text="".join(text)))
                text = []
            if isinstance(part, ToolCallPart):
                items.append(Item(kind="tool_call", call_id=part.call_id, name=part.name,
                                  text=canonical_arguments(part.arguments)))
            elif isinstance(part, ToolResultPart):
                items.append(Item(kind="tool_result", call_id=part.call_id, name=part.name,
                                  text=part.output))
        if text:
            append_item(items, Item(kind=kind, text="".join(text)))
    return items


# --- helpers for emulators that keep conversations (durable providers) -------------------

_WORDS = re.compile(r"\s*\S+|\s+$")


def text_deltas(text: str) -> list[str]:
    """``text`` in word-sized deltas, leading whitespace kept (as real APIs stream)."""
    return _WORDS.findall(text)


def append_item(items: list[Item], item: Item) -> None:
    """Append ``item``, joining consecutive assistant text as ``items_from_messages`` does."""
    if item.kind == "assistant" and items and items[-1].kind == "assistant":
        items[-1] = Item(kind="assistant", text=items[-1].text + item.text)
    else:
        items.append(item)


def pairing_problem(items: Sequence[Item]) -> str | None:
    """The observed 400 message when tool calls and outputs do not pair up, else None.

    An output whose call is not earlier in the conversation: "No tool call found for
    function call output with call_id X."; a call with no output after it: "No tool
    output found for function call X." (providers-wire.md 1.7).
    """
    called: set[str] = set()
    answered: set[str] = set()
    for item in items:
        if item.kind == "tool_call":
            called.add(item.call_id)
        elif item.kind == "tool_result":
            if item.call_id not in called:
                return f"No tool call found for function call output with call_id {item.call_id}."
            answered.add(item.call_id)
    for item in items:
        if item.kind == "tool_call" and item.call_id not in answered:
            return f"No tool output found for function call {item.call_id}."
    return None
