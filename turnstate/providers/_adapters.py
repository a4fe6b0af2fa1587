"""What the adapters share: durable ones keep no loop; stateless ones no cursor."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import ClassVar

import attrs

from turnstate.core._compaction import history_from_compaction
from turnstate.core._content import for_model
from turnstate.core._conversation import Message, Part, Role, ToolResultPart, ToolSpec
from turnstate.core._decisions import TurnContext
from turnstate.core._envelope import ContinuationEnvelope, Mode
from turnstate.core._errors import ConfigurationError, ProviderError
from turnstate.core._json import JsonObject, canonical_json, compact_json
from turnstate.core._media import deferred_media
from turnstate.core._registry import ModelInfo
from turnstate.providers._envelopes import standard_envelope
from turnstate.providers._protocol import (
    HttpRequest,
    ProviderAdapter,
    ProviderCall,
    ProviderResponse,
    StreamParser,
)
from turnstate.providers._requests import json_text_request

ErrorClassifier = Callable[[int, Mapping[str, str], bytes], ProviderError]
"""A non-2xx answer (status, headers, body), or a 2xx one that holds an error object
instead of the event stream, → the typed provider error."""


def canonical_tools(tools: Sequence[ToolSpec]) -> list[ToolSpec]:
    """The tools sorted by name, their schemas' keys sorted recursively: the cached
    prefix never depends on the order in which a caller lists its tools (the toolset
    hash does not either, so a reordering keeps the cursor)."""
    return [attrs.evolve(tool, parameters=json.loads(canonical_json(tool.parameters)))
            for tool in sorted(tools, key=lambda t: t.name)]


@attrs.frozen(kw_only=True)
class ChainedRequest:
    """How a durable API (Responses, Interactions) writes a request body.

    The logic is the same for both: on a cursor, only the new input (the tool results,
    else the user's message); without one, the committed history, the user's message
    and this turn's parts (a tool continuation without a cursor is a caller's bug).
    What differs by wire format is given: the body's field names and how a user
    message, a tool result, an assistant message's parts and a tool are written.
    """

    system_field: str
    cursor_field: str
    cursor_noun: str
    user: Callable[[Sequence[Part]], JsonObject]
    """A user message from its parts, as the model takes them (``core._content.for_model``)."""
    result: Callable[[ToolResultPart], JsonObject]
    assistant: Callable[[Sequence[Part], ModelInfo], list[JsonObject]]
    tool: Callable[[ToolSpec], JsonObject]

    def payload(self, call: ProviderCall, extras: JsonObject) -> JsonObject:
        """The body: model, system, cursor, input, tools, then ``extras``, stored and
        streamed."""
        payload: JsonObject = {"model": call.model.name}
        if call.system_prompt:
            payload[self.system_field] = call.system_prompt
        if call.cursor:
            payload[self.cursor_field] = call.cursor
        payload["input"] = self.input(call)
        if call.tools:
            payload["tools"] = [self.tool(tool) for tool in canonical_tools(call.tools)]
        payload.update(extras)
        payload["store"] = True
        payload["stream"] = True
        return payload

    def input(self, call: ProviderCall) -> list[JsonObject]:
        """Only the new input when chained on a cursor; the whole history otherwise."""
        if call.cursor:
            if call.tool_results:
                return [self.result(result) for result in call.tool_results]
            return [self.user(for_model(call.user_content, call.model))]
        if call.tool_results:
            msg = (f"a tool continuation must chain on the newest {self.cursor_noun} "
                   "(cursor is None)")
            raise ConfigurationError(msg)
        return [*self.compacted_history(call), self.user(for_model(call.user_content, call.model)),
                *self.assistant(call.turn_parts, call.model)]

    def compacted_history(self, call: ProviderCall) -> list[JsonObject]:
        """The history from its latest compaction point for this provider and model
        (the compaction item, then what came after it), else all of it."""
        cut = history_from_compaction(call.history, call.model.provider, call.model.name)
        if cut is None:
            return self.history(call.history, call.model)
        head, later = cut
        return [*self.assistant(head, call.model), *self.history(later, call.model)]

    def history(self, history: Sequence[Message], model: ModelInfo) -> list[JsonObject]:
        """The committed history as input, oldest first."""
        entries: list[JsonObject] = []
        for message in history:
            if message.role == Role.USER:
                entries.append(self.user(for_model(message.parts, model)))
            else:
                entries.extend(self.assistant(message.parts, model))
        return entries


class DurableAdapter(ProviderAdapter):
    """The provider keeps the tool loop (the next call chains on the newest response id)
    and the envelope names that id. Subclasses set the class constants and
    ``base_url``, and implement ``auth_headers`` and ``payload``.

    Both base classes name ``ProviderAdapter`` as their base (a protocol a class may
    subclass), so a mapping written as a literal of several adapters is typed
    ``dict[str, ProviderAdapter]`` for ``TurnEngine``, not ``dict[str, object]``."""

    PROVIDER: ClassVar[str]
    MODE: ClassVar[Mode]
    PATH: ClassVar[str]
    PARSER: ClassVar[type[StreamParser]]
    CLASSIFY: ClassVar[ErrorClassifier]
    base_url: str

    @property
    def provider(self) -> str:
        return self.PROVIDER

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + self.PATH

    def build_request(self, call: ProviderCall) -> HttpRequest:
        with deferred_media() as media:  # the payload's media as marks (memory7)
            text = compact_json(self.payload(call))  # the payload freed once written
        return json_text_request(self.PROVIDER, self.url, self.auth_headers(), text, media)

    def auth_headers(self) -> dict[str, str]:
        """The key's header, or none without a key."""
        raise NotImplementedError

    def payload(self, call: ProviderCall) -> JsonObject:
        """The JSON body for ``call``."""
        raise NotImplementedError

    def stream_parser(self) -> StreamParser:
        return self.PARSER()

    def classify_error(
        self, status: int, headers: Mapping[str, str], body: bytes
    ) -> ProviderError:
        # Through the class: a function kept as a class attribute is not a method.
        return type(self).CLASSIFY(status, headers, body)

    def extend_loop(
        self,
        call: ProviderCall,
        response: ProviderResponse,
        results: Sequence[ToolResultPart],
    ) -> tuple[JsonObject, ...]:
        return ()  # the server keeps the loop

    def envelope(
        self,
        ctx: TurnContext,
        response: ProviderResponse,
        *,
        loop_messages: tuple[JsonObject, ...],
        now: datetime,
        covers_seq: int,
    ) -> ContinuationEnvelope:
        return standard_envelope(ctx, self.MODE, response, loop_messages=(),
                                 now=now, covers_seq=covers_seq)


class StatelessAdapter(ProviderAdapter):
    """The provider keeps nothing: every turn replays, and the tool loop's messages ride
    in a ``stateless-loop`` state that ``decide_turn_persistence`` never lets through."""

    def envelope(
        self,
        ctx: TurnContext,
        response: ProviderResponse,
        *,
        loop_messages: tuple[JsonObject, ...],
        now: datetime,
        covers_seq: int,
    ) -> ContinuationEnvelope:
        return standard_envelope(ctx, Mode.STATELESS_LOOP, response, loop_messages=loop_messages,
                                 now=now, covers_seq=covers_seq)
