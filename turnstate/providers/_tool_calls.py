"""Tool calls some models wrap (``multi_tool_use.parallel``), unwrapped; call ids past a
wire's length limit, shortened; empty or repeated call ids, made distinct."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import attrs

from turnstate.core._conversation import Message, Part, ToolCallPart, ToolResultPart
from turnstate.core._errors import (
    ProviderProtocolError,
    StreamLimitExceeded,
)
from turnstate.core._json import compact_json
from turnstate.providers._frames import text_of


def id_hash(call_id: str, digits: int) -> str:
    """``digits`` hex of ``call_id``'s SHA-256: an id rewritten with it still pairs a
    call with its result, stays apart from another id and is the same in every request."""
    return hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:digits]


def shortened_call_id(call_id: str, limit: int) -> str:
    """``call_id``, or past ``limit`` characters (another server's id: vLLM's
    ``chatcmpl-tool-`` + 32 hex is 46), ``call_`` and 32 hex of its SHA-256."""
    return call_id if len(call_id) <= limit else f"call_{id_hash(call_id, 32)}"


def synthetic_call_id(response_id: str | None, position: int, name: str, arguments: str) -> str:
    """A stable id for a call the server sent with ``"id": ""`` (or none, or another
    call's): derived from the response id, the call's position in the response, its name
    and arguments, so the same stream always gives the same id and two calls of a
    response never share one."""
    seed = f"{response_id or ''}\x00{position}\x00{name}\x00{arguments}"
    return f"call_ts{position}_{hashlib.sha256(seed.encode('utf-8')).hexdigest()[:20]}"


def distinct_call_ids(parts: list[Part], response_id: str | None) -> list[Part]:
    """``parts`` (changed in place) with each tool call's id not empty and not an earlier
    call's: such a call gets ``synthetic_call_id``. For a provider that keeps no state of
    its calls (each request sends them back), so any distinct id pairs a call with its
    result; Anthropic refuses a request whose ``tool_use`` ids repeat ("`tool_use` ids
    must be unique", 400) or are empty."""
    ids: set[str] = set()
    for position, part in enumerate(parts):
        if type(part) is ToolCallPart:
            call_id = part.call_id
            if not call_id or call_id in ids:
                call_id = synthetic_call_id(response_id, position, part.name, part.arguments)
                parts[position] = attrs.evolve(part, call_id=call_id)
            ids.add(call_id)
    return parts


def distinct_history_ids(history: Sequence[Message]) -> Sequence[Message]:
    """``history`` with each tool call's id not empty and not an earlier call's, for a
    request that replays it to a provider that keeps no state of its calls (Anthropic:
    "`tool_use` ids must be unique", 400; OpenAI: an empty id, 400). Chats stored before
    ``distinct_call_ids`` can hold such ids, and a server minting ``call_0`` every turn
    repeats ids across messages. A repeated or empty call gets ``synthetic_call_id`` of
    its message id and position, and the next result carrying its old id after it gets
    the new one (a call and its result stay paired); the first call keeps its id. The
    ids depend only on the message and those before it, so every request of the chat
    writes the same bytes. The same ``history`` when nothing repeats (the usual case:
    one set lookup per call, no copy)."""
    seen: set[str] = set()
    add = seen.add
    for message in history:  # the hot path of a replay: nothing to rename
        for part in message.parts:
            if type(part) is ToolCallPart:
                call_id = part.call_id
                if not call_id or call_id in seen:
                    return _renamed(history)
                add(call_id)
    return history


def _renamed(history: Sequence[Message]) -> list[Message]:
    seen: set[str] = set()
    out = list(history)
    for index, message in enumerate(history):
        parts = message.parts
        sent: dict[str, list[str]] = {}  # a call's stored id -> the ids its calls go as
        new_parts: list[Part] | None = None
        for position, part in enumerate(parts):
            if isinstance(part, ToolCallPart):
                call_id = new_id = part.call_id
                if not call_id or call_id in seen:
                    new_id = synthetic_call_id(message.id, position, part.name,
                                               part.arguments)
                seen.add(new_id)
                sent.setdefault(call_id, []).append(new_id)
            elif isinstance(part, ToolResultPart) and sent.get(part.call_id):
                call_id, new_id = part.call_id, sent[part.call_id].pop(0)
            else:
                continue
            if new_id != call_id:
                new_parts = new_parts if new_parts is not None else list(parts)
                new_parts[position] = attrs.evolve(part, call_id=new_id)
        if new_parts is not None:
            out[index] = attrs.evolve(message, parts=tuple(new_parts))
    return out


class CallLimit:
    """The tool calls a stream parser has seen begin, against the turn's
    ``max_tool_calls`` (``limit``: None, no limit; ``provider_batches`` sets it).

    A stream of nothing but tool calls is bounded by bytes alone (``max_stream_bytes``)
    until it is whole: 100,000 calls were held and parsed before the engine's count of
    the whole response refused them. A parser calls ``begin`` as each call starts, so the
    stream is refused at the first call past the limit (``StreamLimitExceeded``, not the
    provider's error: its bill, what the parser's ``billed`` says, is kept as a cut's)."""

    __slots__ = ("begun", "limit")

    def __init__(self) -> None:
        self.begun = 0
        self.limit: int | None = None

    def begin(self, provider: str) -> None:
        """One more call began.

        Raises:
            StreamLimitExceeded: naming ``max_tool_calls``, at the first call past it.
        """
        self.begun += 1
        if self.limit is not None and self.begun > self.limit:
            raise StreamLimitExceeded(provider, "max_tool_calls",
                                      f"more than {self.limit} tool calls streamed "
                                      "(refused before the response ended)")


PARALLEL_WRAPPER = "multi_tool_use.parallel"
"""A wrapper call some OpenAI models emit instead of parallel calls; never a real tool."""


def unwrap_parallel(provider: str, call: ToolCallPart) -> tuple[ToolCallPart, ...]:
    """``call`` itself, or the calls a ``multi_tool_use.parallel`` wrapper holds.

    The wrapper's arguments are ``{"tool_uses": [{"recipient_name": "functions.NAME",
    "parameters": {...}}, ...]}``; call ``n`` gets the id ``{wrapper id}_{n}``.

    Raises:
        ProviderProtocolError: the wrapper's arguments are not that shape.
    """
    if call.name != PARALLEL_WRAPPER:
        return (call,)
    try:
        value = json.loads(call.arguments)
    except ValueError:
        value = None
    uses = value.get("tool_uses") if isinstance(value, dict) else None
    if not isinstance(uses, list) or not uses:
        msg = f"{PARALLEL_WRAPPER} call {call.call_id} has no tool_uses list"
        raise ProviderProtocolError(provider, msg)
    return tuple(_unwrapped(provider, call, n, use) for n, use in enumerate(uses))


def _unwrapped(provider: str, call: ToolCallPart, n: int, use: Any) -> ToolCallPart:
    name = text_of(use.get("recipient_name")) if isinstance(use, dict) else None
    parameters = use.get("parameters", {}) if isinstance(use, dict) else None
    if not name or not isinstance(parameters, dict):
        msg = f"{PARALLEL_WRAPPER} call {call.call_id}: tool use {n} has no name or parameters"
        raise ProviderProtocolError(provider, msg)
    return attrs.evolve(call, call_id=f"{call.call_id}_{n}", name=name.removeprefix("functions."),
                        arguments=compact_json(parameters))
