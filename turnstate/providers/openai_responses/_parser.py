"""OpenAI Responses stream parsing: SSE events in, provider events and a response out.

Items are tracked by ``output_index``. Deltas (text, refusal, reasoning summary and
reasoning text, function-call arguments) stream out as they come, and
``output_text.done`` streams any text its deltas missed. The complete item of
``response.output_item.done`` is authoritative (a reasoning item's
``encrypted_content`` may be incomplete in ``output_item.added``); an item the stream
never finished is taken from the terminal response's ``output`` (matched by id), or
assembled from its deltas as a last resort. ``response.completed`` and
``response.incomplete`` end the stream; ``response.failed`` and ``error`` raise the
classified error. A ``[DONE]`` sentinel, which the SDK tolerates, is ignored.

Reasoning and tool-call parts are stamped with the model the response names (often a
dated snapshot such as ``gpt-5-mini-2025-08-07``); replay compares it with the
configured model through ``core._compaction.same_model``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import islice
from typing import ClassVar

from turnstate.core._citations import Citation
from turnstate.core._conversation import Usage
from turnstate.core._json import JsonObject
from turnstate.providers._frames import FrameDispatcher, scan_json, text_of
from turnstate.providers._protocol import (
    ProviderEvent,
    ProviderResponse,
    ReasoningDelta,
    SseEvent,
    TextDelta,
    reasoning_delta,
    text_delta,
)
from turnstate.providers._tool_calls import CallLimit
from turnstate.providers.openai_responses._assemble import (
    build_response,
    failed_error,
    message_citations,
    usage_of,
)
from turnstate.providers.openai_responses._errors import (
    PROVIDER,
    stream_error_event,
)
from turnstate.providers.openai_responses._items import _final_position, _ItemState


class ResponsesStreamParser(FrameDispatcher):
    """The ``StreamParser`` of one ``POST /responses`` stream."""

    PROVIDER: ClassVar[str] = PROVIDER
    TYPE_KEY: ClassVar[str] = "type"
    FINAL_EVENT: ClassVar[str] = "response.completed"
    KEPT: ClassVar[frozenset[str]] = frozenset(
        {"response.created", "response.in_progress", "response.queued"})
    """Frames that only name the response (id and model, echoing the request's
    instructions and tools: often the stream's largest): ``response.completed`` names
    it again, so they are decoded only if it does not."""
    # HANDLERS is set after the class body, once its methods exist (``handle``).

    def __init__(self) -> None:
        self._response_id: str | None = None
        self._model = ""
        self._items: dict[int, _ItemState] = {}
        self._top = -1  # the highest key in ``_items``: a new unindexed item goes past it
        self._final: JsonObject | None = None
        self.call_limit = CallLimit()  # the function calls begun, against max_tool_calls

    @property
    def response_id(self) -> str | None:
        """The response's id as the stream named it: the terminal frame's, else the
        newest ``KEPT`` frame's (decoded now), else an unnamed head frame's."""
        if self._final is None or not text_of(self._final.get("id")):
            for frame in self.kept_frames():
                response = frame.get("response")
                if isinstance(response, dict) and (found := text_of(response.get("id"))):
                    return found
        return self._response_id

    def billed(self) -> Usage | None:
        """What the request billed when its terminal frame came but made no answer (a
        ``cancelled`` response: ``finish`` raises): that frame's usage. None before it
        (a stream cut earlier names no usage: its cost is unknown)."""
        return None if self._final is None else usage_of(self._final.get("usage"))

    @property
    def output_started(self) -> bool:
        """A function call has begun (text and reasoning show as events already)."""
        return any(state.item.get("type") == "function_call" for state in self._items.values())

    def cited(self) -> tuple[Citation, ...]:
        """The citations of the text streamed so far (kept by a cut answer, wire7)."""
        return message_citations(self._items[key].assembled() for key in sorted(self._items))

    def finish(self) -> ProviderResponse:
        final = self.final_frame()
        output = final.get("output")
        final_items = [i for i in output if isinstance(i, dict)] if isinstance(output, list) else []
        fallback = None if text_of(final.get("id")) else self.response_id
        return build_response(final, self._merged(final_items), fallback_id=fallback)

    def _merged(self, final_items: list[JsonObject]) -> list[JsonObject]:
        """Streamed items in output order, completed by the terminal ``output``.

        A streamed item's terminal copy is the one with its id, else the one at its
        ``output_index`` (relays rewrite ids from event to event, so ids may never
        match); terminal items no streamed item claimed come after, so nothing
        appears twice.
        """
        by_id = {item_id: pos for pos, item in enumerate(final_items)
                 if (item_id := text_of(item.get("id")))}  # a list or an object is no id
        claimed: set[int] = set()
        items: list[JsonObject] = []
        for index in sorted(self._items):
            state = self._items[index]
            position = _final_position(state.item, index, final_items, by_id, claimed)
            if position is not None:
                claimed.add(position)
            if state.done or position is None:
                items.append(state.assembled())
            else:
                items.append(final_items[position])
        items.extend(item for pos, item in enumerate(final_items) if pos not in claimed)
        return items

    # --- handlers --------------------------------------------------------------------

    def _on_response(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        response = frame.get("response")
        if isinstance(response, dict):
            self._response_id = text_of(response.get("id")) or self._response_id
            self._model = text_of(response.get("model")) or self._model
        return ()

    def _on_terminal(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        self._on_response(frame)
        response = frame.get("response")
        self.finished(response if isinstance(response, dict) else {})
        return ()

    def _on_failed(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        self._on_response(frame)
        response = frame.get("response")
        raise failed_error(response if isinstance(response, dict) else {})

    def _on_error(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        raise stream_error_event(frame)

    def _state(self, frame: JsonObject, item_id: object = None) -> _ItemState:
        """The item a frame is about: the one at its ``output_index``, else the one its
        ``item_id`` names, else (no integer index: a relay dropped it) the last item
        opened, else a new one. A new item per frame without an index made each delta an
        item of its own: text repeated, a call's argument pieces nameless calls run as
        tools, a call run twice (attack3)."""
        index = frame.get("output_index")
        state = self._items.get(index) if isinstance(index, int) else None
        if state is not None:
            return state
        if item_id is None:
            item_id = frame.get("item_id")
        if item_id is not None:  # the newest items only: a scan of all made a stream of
            for state in islice(reversed(self._items.values()), 16):  # them quadratic
                if state.item.get("id") == item_id:
                    return state
        if not isinstance(index, int):
            if self._items:  # the item opened last (O(1): a dict keeps insertion order)
                return self._items[next(reversed(self._items))]
            index = 0
        return self._put(index, _ItemState(item={"id": item_id}))

    def _put(self, key: int, state: _ItemState) -> _ItemState:
        self._items[key] = state
        self._top = max(self._top, key)
        return state

    def _on_item_added(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        item = frame.get("item")
        index = frame.get("output_index")
        key = index if isinstance(index, int) else self._top + 1
        state = _ItemState(item=dict(item) if isinstance(item, dict) else {})
        old = self._items.get(key)
        self._becomes(old if old is not None else _ItemState(item={}), state.item.get("type"))
        self._put(key, state)
        return ()

    def _becomes(self, state: _ItemState, kind: object) -> None:
        """``state``'s item takes the type ``kind``: a function call begins when it was
        none before (counted once, whatever frames repeat it: ``call_limit``)."""
        if kind == "function_call" and state.item.get("type") != "function_call":
            self.call_limit.begin(PROVIDER)

    def _on_item_done(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        item = frame.get("item")
        state = self._state(frame, item.get("id") if isinstance(item, dict) else None)
        if isinstance(item, dict):
            self._becomes(state, item.get("type"))
            state.item = item
            state.done = True
        return ()

    def _on_text(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        delta = frame.get("delta")
        if not isinstance(delta, str):  # text_of, inline: one call less per delta
            delta = ""
        state = self._state(frame)
        state.item.setdefault("type", "message")
        state.text.append(delta)
        return (text_delta(delta),) if delta else ()

    def _typed_delta(self, frame: JsonObject) -> tuple[_ItemState, str] | None:
        """A delta frame's item and string delta when the item is already typed (every
        delta after the first): what the fast handlers take; None for the full path."""
        delta = frame.get("delta")
        index = frame.get("output_index")
        state = self._items.get(index) if type(index) is int else None
        if state is None or type(delta) is not str or "type" not in state.item:
            return None
        return state, delta

    def _fast_text(self, frame: JsonObject) -> Sequence[ProviderEvent] | None:
        """``_on_text`` for a string delta of an item already typed, or None."""
        typed = self._typed_delta(frame)
        if typed is None:
            return None
        typed[0].text.append(typed[1])
        return (text_delta(typed[1]),) if typed[1] else ()

    def _fast_refusal(self, frame: JsonObject) -> Sequence[ProviderEvent] | None:
        """``_on_refusal`` for a string delta of an item already typed, or None."""
        typed = self._typed_delta(frame)
        if typed is None:
            return None
        state, delta = typed
        if state.refusal is None:
            state.refusal = []
        state.refusal.append(delta)
        return (text_delta(delta),) if delta else ()

    def _fast_reasoning(self, frame: JsonObject) -> Sequence[ProviderEvent] | None:
        """``_on_reasoning`` for a string delta of an item already typed, or None."""
        typed = self._typed_delta(frame)
        if typed is None:
            return None
        typed[0].reasoning.append(typed[1])
        return (reasoning_delta(typed[1]),) if typed[1] else ()

    def _fast_arguments(self, frame: JsonObject) -> Sequence[ProviderEvent] | None:
        """``_on_arguments`` for a string delta of an item already typed, or None."""
        typed = self._typed_delta(frame)
        if typed is None:
            return None
        typed[0].arguments.append(typed[1])
        return ()

    def feed_many(self, batch: Sequence[SseEvent], out: list[ProviderEvent]) -> None:
        """``FrameDispatcher.feed_many`` with the text deltas taken inline: a frame named
        ``response.output_text.delta`` that is one JSON
        object of that type, whose item is already typed and whose delta is a string, is
        what ``_fast_text`` takes, done here without the calls to ``feed``, ``_fast_text``
        and ``_typed_delta`` (issue 26: most of a stream's frames). Every other frame
        goes through ``feed``, as one by one (tests/providers/test_frame_fast_path.py
        holds the two equal)."""
        items = self._items
        for event in batch:
            name = event.event
            if name in _TEXT_FRAMES:
                data = event.data
                try:
                    frame, end = scan_json(data, 0)
                except (StopIteration, ValueError):
                    end = -1
                if end == len(data) and type(frame) is dict and frame.get("type") == name:
                    index = frame.get("output_index")
                    state = items.get(index) if type(index) is int else None
                    delta = frame.get("delta")
                    if state is not None and type(delta) is str and "type" in state.item:
                        state.text.append(delta)
                        if delta:
                            out.append(text_delta(delta))
                        continue
                events = self._feed(event, name)  # what ``feed`` does after its fast path
            else:
                events = self.feed(event)
            if events:
                out.extend(events)
            if self.done:
                return

    def _on_text_done(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        # The complete text may extend what the deltas carried (a lossy relay, a
        # trimmed recording): stream the remainder so the deltas add up to the part.
        text = text_of(frame.get("text"))
        if text is None:
            return ()
        state = self._state(frame)
        streamed = "".join(state.text)
        if len(text) > len(streamed) and text.startswith(streamed):
            state.text.append(text[len(streamed):])
            return (TextDelta(text=text[len(streamed):]),)
        return ()

    def _on_refusal(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        # Streamed as text, kept as the item's refusal: a stream whose terminal frame
        # has no ``output`` still finishes "refusal" (wire8).
        delta = text_of(frame.get("delta")) or ""
        state = self._state(frame)
        state.item.setdefault("type", "message")
        if state.refusal is None:
            state.refusal = []
        state.refusal.append(delta)
        return (text_delta(delta),) if delta else ()

    def _on_refusal_done(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        # As ``_on_text_done``: stream the remainder the deltas missed.
        text = text_of(frame.get("refusal"))
        if text is None:
            return ()
        state = self._state(frame)
        state.item.setdefault("type", "message")
        if state.refusal is None:
            state.refusal = []
        streamed = "".join(state.refusal)
        if len(text) > len(streamed) and text.startswith(streamed):
            state.refusal.append(text[len(streamed):])
            return (TextDelta(text=text[len(streamed):]),)
        return ()

    def _on_annotation(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        # Kept for an item the stream never finishes (``output_item.done``'s is whole).
        state = self._state(frame)
        state.item.setdefault("type", "message")
        if state.annotations is None:
            state.annotations = []
        state.annotations.append(frame.get("annotation"))
        return ()

    def _on_arguments(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        state = self._state(frame)
        if "type" not in state.item:
            self._becomes(state, "function_call")
            state.item["type"] = "function_call"
        state.arguments.append(text_of(frame.get("delta")) or "")
        return ()

    def _on_arguments_done(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        arguments = text_of(frame.get("arguments"))
        if arguments is not None:
            self._state(frame).arguments[:] = [arguments]
        return ()

    def _on_reasoning(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        delta = text_of(frame.get("delta")) or ""
        state = self._state(frame)
        state.item.setdefault("type", "reasoning")
        state.reasoning.append(delta)
        return (reasoning_delta(delta),) if delta else ()

    def _on_summary_part(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        # Summary parts are separate paragraphs; keep them apart in the streamed text.
        state = self._state(frame)
        if state.reasoning:
            state.reasoning.append("\n\n")
            return (ReasoningDelta(text="\n\n"),)
        return ()


_TEXT_FRAMES = frozenset({"response.output_text.delta"})
"""The frames ``_fast_text`` takes, which ``feed_many`` takes inline (a refusal's deltas,
rare, go through ``feed`` to ``_fast_refusal``)."""


_Handler = Callable[[ResponsesStreamParser, JsonObject], Sequence[ProviderEvent]]
_HANDLERS: Mapping[str, _Handler] = {
    "response.created": ResponsesStreamParser._on_response,
    "response.in_progress": ResponsesStreamParser._on_response,
    "response.queued": ResponsesStreamParser._on_response,
    "response.completed": ResponsesStreamParser._on_terminal,
    "response.incomplete": ResponsesStreamParser._on_terminal,
    "response.failed": ResponsesStreamParser._on_failed,
    "error": ResponsesStreamParser._on_error,
    "response.output_item.added": ResponsesStreamParser._on_item_added,
    "response.output_item.done": ResponsesStreamParser._on_item_done,
    "response.output_text.delta": ResponsesStreamParser._on_text,
    "response.output_text.done": ResponsesStreamParser._on_text_done,
    "response.output_text.annotation.added": ResponsesStreamParser._on_annotation,
    "response.refusal.delta": ResponsesStreamParser._on_refusal,
    "response.refusal.done": ResponsesStreamParser._on_refusal_done,
    "response.function_call_arguments.delta": ResponsesStreamParser._on_arguments,
    "response.function_call_arguments.done": ResponsesStreamParser._on_arguments_done,
    "response.reasoning_summary_text.delta": ResponsesStreamParser._on_reasoning,
    "response.reasoning_text.delta": ResponsesStreamParser._on_reasoning,
    "response.reasoning_summary_part.added": ResponsesStreamParser._on_summary_part,
}
ResponsesStreamParser.handle(_HANDLERS)
ResponsesStreamParser.FAST = {
    "response.output_text.delta": ResponsesStreamParser._fast_text,
    "response.refusal.delta": ResponsesStreamParser._fast_refusal,
    "response.reasoning_summary_text.delta": ResponsesStreamParser._fast_reasoning,
    "response.reasoning_text.delta": ResponsesStreamParser._fast_reasoning,
    "response.function_call_arguments.delta": ResponsesStreamParser._fast_arguments,
}
"""The delta frames a Responses stream is mostly made of (``FrameDispatcher.FAST``)."""


# --- assembling the response (shared with non-streaming bodies) ----------------------
