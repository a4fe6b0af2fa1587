"""Chat Completions streams: chunks in, text and reasoning deltas out, then a response.

Every frame is a ``chat.completion.chunk`` (no ``event:`` line). The parser keeps choice
0: ``content`` (a string, or, from Mistral's reasoning models, a list of ``text`` and
``thinking`` parts) and reasoning deltas (DeepSeek's ``reasoning_content``, or
``reasoning`` as OpenRouter, Groq and gpt-oss servers send it: either becomes
``ReasoningDelta`` events and one reasoning part whose ``kind`` names the field, and a
delta carrying both is read once), tool-call fragments accumulated by ``index`` (the
first fragment of a call carries its id and name, the later ones pieces of
``arguments``, a JSON string, or the object itself as llama.cpp and TGI send it;
parallel calls use indexes 0, 1, ...; a server that omits ``index`` or sends
``"id": ""``, as Gemini's OpenAI-compatible endpoint does, gets a fragment with a name
taken as a new call and a synthetic id, ``synthetic_call_id``; the deprecated
``function_call`` delta, which finish reason ``function_call`` ends, is one such call
when the delta has no ``tool_calls``), the ``finish_reason`` (``INTERRUPTED_FINISH``
raises), and
``usage`` from whichever chunk carries it (OpenAI sends a last ``choices: []`` chunk
when ``stream_options.include_usage`` is set; DeepSeek puts it on the ``finish_reason``
chunk).

When the stream counts as complete (``done``, and ``finish()`` succeeds): once
``data: [DONE]`` arrived, or once a ``finish_reason`` and a ``usage`` object have both
been seen, in either order. The recorded streams stop there without ``[DONE]``. A
stream that ends after a ``finish_reason`` but before the usage it asked for (and
without ``[DONE]``) was cut: ``finish()`` raises ``ProviderProtocolError``; so does one
that reached ``[DONE]`` with a tool call but no ``finish_reason`` (code
``no_finish_reason``: a call a relay cut must never run). Text closed by ``[DONE]`` without
a ``finish_reason`` completes, its finish unknown (None): the server said it was done.
A body (``parse_chat_body``) follows the same rule: ``finish_reason: null`` with a tool
call raises (``no_finish_reason``), text alone completes with finish None.

``annotations`` (``url_citation``s of search models: on a delta, the last ones as
OpenAI streams them, or on the message) become the text part's citations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from turnstate.core._citations import Citation
from turnstate.core._conversation import Part, ReasoningPart, TextPart, ToolCallPart, Usage
from turnstate.core._cost import tier_metadata
from turnstate.core._errors import (
    ProviderProtocolError,
)
from turnstate.core._json import JsonObject, compact_json
from turnstate.providers._citations import openai_citation, read_citations
from turnstate.providers._frames import (
    error_object,
    is_done_marker,
    load_frame,
    object_of,
    text_of,
)
from turnstate.providers._protocol import (
    ProviderEvent,
    ProviderResponse,
    SseEvent,
    reasoning_delta,
    text_delta,
)
from turnstate.providers._tool_calls import CallLimit, synthetic_call_id, unwrap_parallel
from turnstate.providers.chat_completions._fields import (
    FINISH_REASONS,
    INTERRUPTED_FINISH,
    UsageReader,
    check_finish,
    normalise_finish,
    read_chat_usage,
    stream_error,
)

__all__ = ["FINISH_REASONS", "INTERRUPTED_FINISH", "ChatCompletionsStreamParser", "UsageReader",
           "check_finish", "normalise_finish", "parse_chat_body", "parse_response_body",
           "read_chat_usage", "stream_error"]

NO_FINISH_REASON = "no_finish_reason"
"""The code of a response with a tool call but no ``finish_reason`` (streamed or not)."""

REASONING_FIELDS = ("reasoning_content", "reasoning")
"""The delta and message fields that carry reasoning text: DeepSeek's, then the one
OpenRouter, Groq (``reasoning_format: parsed``) and gpt-oss servers use. Only the first
that carries text is read: vLLM from its rename until it dropped the old name (#27752 to
#33402), and relays for clients that read one field, send both with the same text."""


def _starts_another_call(
    buffer: _CallBuffer, call_id: str, function: JsonObject, indexed: bool
) -> bool:
    """Whether a fragment for a position already taken is a new call: its id differs
    from the buffered call's, or (no ``index`` sent) it names a function again."""
    if call_id and buffer.call_id and call_id != buffer.call_id:
        return True
    return not indexed and bool(text_of(function.get("name"))) and bool(buffer.name)


def _joined_name(name: str, fragment: str) -> str:
    """A call's name after another fragment names it (wire8): pieces are joined, as
    openai-python's ``accumulate_delta`` joins every string; the same name again (a
    server that repeats it on every fragment) or a longer one that starts with it (a
    snapshot) is not doubled. OpenAI, vLLM, llama.cpp and Ollama name a call once."""
    if not name or fragment == name or fragment.startswith(name):
        return fragment
    return name + fragment


class _CallBuffer:
    __slots__ = ("arguments", "call_id", "name")

    def __init__(self) -> None:
        self.call_id = ""
        self.name = ""
        self.arguments: list[str] = []


class _Assembly:
    """What a response accumulates; shared by the stream parser and the body reader."""

    def __init__(self, provider: str, read_usage: UsageReader) -> None:
        self.provider = provider
        self.read_usage = read_usage
        self.response_id: str | None = None
        self.model = ""
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.reasoning_kind = "reasoning_content"
        self.calls: dict[int, _CallBuffer] = {}
        self.call_limit = CallLimit()  # the calls begun, against ``max_tool_calls``
        self.aliases: dict[int, int] = {}
        self.finish_reason: str | None = None
        self.usage: JsonObject | None = None
        self.tier: object = None
        self.refused = False
        self.annotations: list[Any] = []
        self.notes: JsonObject | None = None
        """Audit metadata the adapter adds (the fields the server refused)."""

    def add_call_fragment(self, position: int, fragment: JsonObject) -> None:
        index = fragment.get("index")
        indexed = isinstance(index, int)
        index = index if isinstance(index, int) else position
        key = self.aliases.get(index, index)
        call_id = text_of(fragment.get("id")) or ""
        function = object_of(fragment.get("function"))
        buffer = self.calls.get(key)
        if buffer is not None and _starts_another_call(buffer, call_id, function, indexed):
            # Some servers reuse an index for parallel calls, others send none: a new
            # id, or a name without an index, starts a new call.
            key = self.aliases[index] = max(self.calls) + 1
            buffer = None
        if buffer is None:
            self.call_limit.begin(self.provider)
            buffer = self.calls[key] = _CallBuffer()
        if call_id:
            buffer.call_id = call_id
        name = text_of(function.get("name"))
        if name:
            buffer.name = _joined_name(buffer.name, name)
        arguments = function.get("arguments")
        if type(arguments) is str:
            if arguments:
                buffer.arguments.append(arguments)
        elif isinstance(arguments, dict):  # llama.cpp, TGI: the object, not its JSON text
            buffer.arguments.append(compact_json(arguments))

    def response(self) -> ProviderResponse:
        parts: list[Part] = []
        if self.reasoning:
            parts.append(ReasoningPart(provider=self.provider, model=self.model,
                                       kind=self.reasoning_kind, text="".join(self.reasoning)))
        if self.text:
            parts.append(TextPart(text="".join(self.text),
                                  citations=read_citations(self.annotations, openai_citation)))
        ids: set[str] = set()
        for position, key in enumerate(sorted(self.calls)):
            buffer = self.calls[key]
            if not buffer.name:
                msg = f"tool call at index {key} has no name"
                raise ProviderProtocolError(self.provider, msg)
            arguments = "".join(buffer.arguments) or "{}"
            call_id = buffer.call_id
            if not call_id or call_id in ids:  # none, or another call's (attack3)
                call_id = synthetic_call_id(self.response_id, position, buffer.name, arguments)
            ids.add(call_id)
            call = ToolCallPart(call_id=call_id, name=buffer.name, arguments=arguments,
                                provider=self.provider, model=self.model)
            parts.extend(unwrap_parallel(self.provider, call))
        usage, metadata = self.read_usage(self.usage) if self.usage is not None else (Usage(), {})
        tier = tier_metadata(self.tier)
        if tier:
            metadata = {**metadata, **tier}
        if self.notes:
            metadata = {**metadata, **self.notes}
        finish = normalise_finish(self.finish_reason)
        if self.refused and finish == "stop":
            finish = "refusal"
        return ProviderResponse(response_id=self.response_id, parts=tuple(parts), usage=usage,
                                finish_reason=finish, metadata=metadata,
                                raw_finish_reason=self.finish_reason)

    def add_reasoning(self, kind: str, text: str) -> None:
        """Reasoning text from ``reasoning_content`` or ``reasoning`` (the first field
        seen names the part's kind)."""
        if not self.reasoning:
            self.reasoning_kind = kind
        self.reasoning.append(text)

    def add_parts(self, parts: list[Any], events: list[ProviderEvent] | None) -> None:
        """``content`` as a list of parts (Mistral's reasoning models): a ``text`` part is
        the answer's text, a ``thinking`` part (its ``thinking`` a list of text parts)
        reasoning of kind ``thinking``; other parts are ignored. ``events`` (None for a
        body) gets a delta for each piece."""
        for part in parts:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and (text := text_of(part.get("text"))):
                self.text.append(text)
                if events is not None:
                    events.append(text_delta(text))
            elif kind == "thinking":
                inner = part.get("thinking")
                for piece in inner if isinstance(inner, list) else (inner,):
                    text = text_of(piece.get("text") if isinstance(piece, dict) else piece)
                    if text:
                        self.add_reasoning("thinking", text)
                        if events is not None:
                            events.append(reasoning_delta(text))

    def add_refusal(self, refusal: str) -> None:
        """A refusal (``delta.refusal`` / ``message.refusal``) is the answer's text."""
        self.text.append(refusal)
        self.refused = True


class ChatCompletionsStreamParser:
    """Parses one Chat Completions stream (see the module docstring for completeness)."""

    def __init__(self, provider: str, read_usage: UsageReader = read_chat_usage,
                 notes: JsonObject | None = None) -> None:
        self._state = _Assembly(provider, read_usage)
        self._state.notes = notes
        self._done_marker = False
        self._tool_calls = False  # a delta carried tool_calls: function_call is a mirror
        self.call_limit = self._state.call_limit

    @property
    def output_started(self) -> bool:
        """A tool call has begun (text and reasoning show as events already)."""
        return bool(self._state.calls)

    def cited(self) -> tuple[Citation, ...]:
        """The citations of the text streamed so far (its deltas' ``annotations``): what
        a stream cut mid-answer keeps on the text it showed (``provider_batches``)."""
        state = self._state
        return read_citations(state.annotations, openai_citation) if state.text else ()

    @property
    def done(self) -> bool:
        state = self._state
        return self._done_marker or (state.finish_reason is not None and state.usage is not None)

    def feed(self, event: SseEvent) -> Sequence[ProviderEvent]:
        if self._done_marker:
            return ()
        if is_done_marker(event.data):
            self._done_marker = True
            return ()
        if not event.data:  # ``data:`` alone: the SSE spec dispatches no event (a keep-alive)
            return ()
        frame = load_frame(self._state.provider, event)
        error = frame.get("error")
        if error is not None and (fields := error_object(error)) is not None:
            raise stream_error(self._state.provider, fields)  # an object, or a relay's text
        return self._chunk(frame)

    def _chunk(self, frame: JsonObject) -> list[ProviderEvent]:
        state = self._state
        if not state.response_id:  # Azure's first chunk has "id": "" (filter results only)
            state.response_id = text_of(frame.get("id")) or None
        if not state.model:
            state.model = text_of(frame.get("model")) or ""
        usage = frame.get("usage")
        if isinstance(usage, dict):  # the tier read once, with the usage it prices
            state.usage, state.tier = usage, frame.get("service_tier")
        events: list[ProviderEvent] = []
        choices = frame.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            self._delta(object_of(choice.get("delta")), events)
            reason = text_of(choice.get("finish_reason"))
            if reason:
                check_finish(state.provider, reason)
                state.finish_reason = reason
        return events

    def _delta(self, delta: JsonObject, events: list[ProviderEvent]) -> None:
        state = self._state
        for field in REASONING_FIELDS:  # the first one that carries text: some servers
            reasoning = text_of(delta.get(field))  # send both, the same text twice
            if reasoning:
                state.add_reasoning(field, reasoning)
                events.append(reasoning_delta(reasoning))
                break
        content = delta.get("content")
        if type(content) is str:
            if content:
                state.text.append(content)
                events.append(text_delta(content))
        elif type(content) is list:  # typed parts: Mistral's reasoning models
            state.add_parts(content, events)
        refusal = text_of(delta.get("refusal"))
        if refusal:
            state.add_refusal(refusal)
            events.append(text_delta(refusal))
        annotations = delta.get("annotations")  # url citations (search models), at the end
        if type(annotations) is list:
            state.annotations.extend(annotations)
        fragments = delta.get("tool_calls")
        if isinstance(fragments, list):
            self._tool_calls = True
            for position, fragment in enumerate(fragments):
                if isinstance(fragment, dict):
                    state.add_call_fragment(position, fragment)
        elif type(delta.get("function_call")) is dict and not self._tool_calls:
            # the deprecated single call (never beside tool_calls, which a server that
            # mirrors both sends too)
            state.add_call_fragment(0, {"function": delta["function_call"]})

    def finish(self) -> ProviderResponse:
        if not self.done:
            state = self._state
            seen = "a finish_reason but no usage" if state.finish_reason else "no finish_reason"
            msg = f"the stream ended before it completed ({seen} and no [DONE])"
            raise ProviderProtocolError(state.provider, msg)
        if self._state.finish_reason is None and self._state.calls:  # never run a cut call
            msg = ("the stream ended with [DONE] but no finish_reason after a tool call: "
                   "the call may be cut")
            raise ProviderProtocolError(self._state.provider, msg, code=NO_FINISH_REASON)
        return self._state.response()


def parse_chat_body(
    body: JsonObject, *, provider: str, read_usage: UsageReader = read_chat_usage
) -> ProviderResponse:
    """A non-streaming ``chat.completion`` body → the response it stands for.

    Raises:
        ProviderError: the body is an error body.
        ProviderProtocolError: it has no choice 0 with a message.
    """
    error = error_object(body.get("error"))
    if error is not None:
        raise stream_error(provider, error)
    state = _Assembly(provider, read_usage)
    state.response_id = text_of(body.get("id"))
    state.model = text_of(body.get("model")) or ""
    choices = body.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        msg = "the completion has no choice with a message"
        raise ProviderProtocolError(provider, msg)
    _read_message(state, choice["message"])
    state.finish_reason = text_of(choice.get("finish_reason"))
    if state.finish_reason:
        check_finish(provider, state.finish_reason)
    elif state.calls:  # as a stream's: a call the server never said it finished never runs
        msg = "the completion has a tool call but no finish_reason: the call may be cut"
        raise ProviderProtocolError(provider, msg, code=NO_FINISH_REASON)
    usage = body.get("usage")
    state.usage = usage if isinstance(usage, dict) else None
    state.tier = body.get("service_tier")
    return state.response()


def _read_message(state: _Assembly, message: JsonObject) -> None:
    """A body's message: reasoning, text (or parts), refusal, annotations, tool calls."""
    for field in REASONING_FIELDS:
        if reasoning := text_of(message.get(field)):
            state.add_reasoning(field, reasoning)
            break
    content = message.get("content")
    if isinstance(content, list):
        state.add_parts(content, None)
    elif content := text_of(content):
        state.text.append(content)
    if refusal := text_of(message.get("refusal")):
        state.add_refusal(refusal)
    if type(annotations := message.get("annotations")) is list:
        state.annotations.extend(annotations)
    calls = message.get("tool_calls")
    for position, call in enumerate(calls if isinstance(calls, list) else ()):
        if isinstance(call, dict):
            state.add_call_fragment(position, {**call, "index": position})
    if not isinstance(calls, list) and isinstance(message.get("function_call"), dict):
        state.add_call_fragment(0, {"function": message["function_call"]})


def parse_response_body(body: JsonObject) -> ProviderResponse:
    """A non-streaming OpenAI-compatible body (see ``parse_chat_body``)."""
    return parse_chat_body(body, provider="openai-compatible")
