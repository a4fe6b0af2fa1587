"""Gemini Interactions stream parsing (the current "steps" format).

Events (providers-wire.md 2.5): ``interaction.created`` names the interaction (the new
cursor); ``step.start`` opens step ``index`` (a ``thought``, ``model_output`` or
``function_call``; a function call may carry its complete ``arguments`` here);
``step.delta`` adds ``text``, ``arguments_delta`` (partial JSON, concatenated),
``image`` (one whole generated image, as an ``image`` content block of a step is: kept
as an ``ImagePart`` after the step's text and streamed as ``ImageOutput``, within
``core._media_output.OutputMedia``'s bound; ``audio`` is counted, not kept),
``thought_signature``, ``thought_summary`` or ``text_annotation_delta`` (a text delta
may also carry ``annotations`` itself, the shape before that delta type: both are read,
spans of the step's whole text); ``step.stop`` closes the step, its running ``usage``
(when it has one) what a cut request billed so far (``billed``);
``interaction.completed`` carries the final status and ``total_*`` usage and ends the
stream. A server-tool step (``google_search_call``, ``code_execution_result``, ...:
``SERVER_STEP_TYPES``) starts nearly empty and gets its ``arguments`` or ``result``,
``is_error`` and signature from ``step.delta`` frames of its own type, merged into the
step it keeps (opaque, replayed to the same model). ``error`` events raise the
classified error; ``event: done`` / ``data: [DONE]`` and unknown events are ignored.
A delta without ``type`` is recognised by its field (recorded streams send
``{"signature": ...}`` alone).

The legacy format (before the May 2026 change: ``interaction.start``, ``content.*``,
``interaction.complete``, a body with ``outputs`` and no ``steps``; providers-wire.md
2.6) is not read: Google removed it on 2026-06-08, so only a stale relay or fake server
can send it. Its first frame (or such a body) fails the turn at once with a
``ProviderProtocolError`` that names it (``LEGACY_EVENTS``), before any output: read as
unknown events it yielded nothing and failed only at the stream's end, its text dropped.

The status becomes the finish reason as ``_status`` says (``in_progress`` and
``queued`` raise: no finished answer); ``failed`` raises its first error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import suppress
from typing import Any, ClassVar

import attrs

from turnstate.core._citations import Citation
from turnstate.core._conversation import Part, Usage
from turnstate.core._errors import ProviderProtocolError
from turnstate.core._json import JsonObject
from turnstate.core._media import ImagePart
from turnstate.core._media_output import OutputMedia
from turnstate.providers._frames import FrameDispatcher, load_frame, text_of
from turnstate.providers._protocol import (
    ImageOutput,
    ProviderEvent,
    ProviderResponse,
    reasoning_delta,
    text_delta,
)
from turnstate.providers._tool_calls import CallLimit
from turnstate.providers.gemini_interactions._assemble import (
    INPUT_STEPS,
    LEGACY_EVENTS,
    TEXT_SIGNATURE,
    build_response,
    content_text,
    drop_media,
    failed_error,
    legacy_format_error,
    parse_response_body,
    step_part,
    step_parts,
    take_images,
    text_part,
)
from turnstate.providers.gemini_interactions._errors import PROVIDER, stream_error_event
from turnstate.providers.gemini_interactions._steps_wire import (
    SERVER_CALL_STEPS,
    SERVER_STEP_TYPES,
    merge_step_delta,
    usage_of,
)

__all__ = ["INPUT_STEPS", "LEGACY_EVENTS", "SERVER_CALL_STEPS", "SERVER_STEP_TYPES",
           "TEXT_SIGNATURE", "InteractionsStreamParser", "build_response", "failed_error",
           "legacy_format_error", "merge_step_delta", "parse_response_body", "step_part",
           "step_parts", "usage_of"]


@attrs.define
class _StepState:
    """One step as the stream builds it."""

    step: JsonObject
    text: list[str] = attrs.field(factory=list)
    arguments: list[str] = attrs.field(factory=list)
    summary: list[str] = attrs.field(factory=list)
    signature: str | None = None
    annotations: list[Any] | None = None  # ``text_annotation_delta``s: rare
    dropped: dict[str, int] | None = None  # audio...: no part holds them (wire8)
    images: list[Part] | None = None  # generated images (or their placeholders), whole

    @property
    def kind(self) -> str:
        return text_of(self.step.get("type")) or ""

    def assembled(self) -> JsonObject:
        """The step as a complete (non-streaming) step object."""
        step = dict(self.step)
        if self.text and (self.annotations or content_text(step.get("content"))
                          != "".join(self.text)):  # else the start's content, cited, stands
            step["content"] = [{"type": "text", "text": "".join(self.text)}]
            if self.annotations:
                step["content"][0]["annotations"] = self.annotations
        if self.arguments:
            step["arguments"] = "".join(self.arguments)
        if self.summary:
            step["summary"] = [{"type": "text", "text": "".join(self.summary)}]
        if self.signature:
            step["signature"] = self.signature
        return step


class InteractionsStreamParser(FrameDispatcher):
    """The ``StreamParser`` of one ``POST /interactions`` stream."""

    PROVIDER: ClassVar[str] = PROVIDER
    TYPE_KEY: ClassVar[str] = "event_type"
    FINAL_EVENT: ClassVar[str] = "interaction.completed"
    KEPT: ClassVar[frozenset[str]] = frozenset({"interaction.status_update", "step.stop"})
    """Frames kept undecoded for a fallback: status frames only repeat the interaction's
    id (decoded only if no other frame named it); ``step.stop``'s running ``usage`` is
    read only when a cut stream's ``billed`` needs it."""
    # HANDLERS is set after the class body, once its methods exist (``handle``).

    def __init__(self) -> None:
        self._interaction_id: str | None = None
        self._model = ""
        self._steps: dict[int, _StepState] = {}
        self._final: JsonObject | None = None
        self._running: Any = None  # the latest ``step.stop``'s running ``usage``
        self.call_limit = CallLimit()  # the function calls begun, against max_tool_calls
        self._media = OutputMedia()  # the generated image bytes kept, against their limit

    @property
    def interaction_id(self) -> str | None:
        """The interaction's id: as the created and completed frames name it, else the
        newest ``KEPT`` status frame's (decoded now)."""
        if self._interaction_id is None:
            for frame in self._kept_of("interaction.status_update"):
                if found := text_of(frame.get("interaction_id")):
                    return found
        return self._interaction_id

    def _kept_of(self, name: str) -> Iterator[JsonObject]:
        """The ``KEPT`` frames named ``name``, decoded now, newest first."""
        for event in reversed(self._kept or ()):
            if event.event == name:
                yield load_frame(self.PROVIDER, event)

    def billed(self) -> Usage | None:
        """What the request billed when its terminal frame came but made no answer (a
        ``cancelled`` or unfinished interaction: ``finish`` raises): that frame's usage.
        Before it, the running total the latest ``step.stop`` carried (providers-wire.md
        2.5: a floor, the steps after it not counted), else None."""
        if self._final is not None:
            return usage_of(self._final.get("usage"))
        running = self._running  # an unnamed step.stop's, else the newest named one's
        if running is None:
            with suppress(ProviderProtocolError):  # a malformed one says nothing
                running = next((frame["usage"] for frame in self._kept_of("step.stop")
                                if isinstance(frame.get("usage"), Mapping)), None)
        return None if running is None else usage_of(running)

    @property
    def output_started(self) -> bool:
        """A function call has begun (text and thoughts show as events already)."""
        return any(state.kind == "function_call" for state in self._steps.values())

    def cited(self) -> tuple[Citation, ...]:
        """The citations of the ``model_output`` text streamed so far, each step's spans
        its own: what a stream cut mid-answer keeps on the text it showed."""
        cited: tuple[Citation, ...] = ()
        for index in sorted(self._steps):
            if (state := self._steps[index]).kind == "model_output" and state.text:
                step = state.assembled()
                cited += text_part(content_text(step.get("content")),
                                    step.get("content")).citations
        return cited

    def finish(self) -> ProviderResponse:
        final = {"model": self._model, **self.final_frame()}
        states = [self._steps[index] for index in sorted(self._steps)]
        dropped: dict[str, int] = {}
        for state in states:
            for kind, count in (state.dropped or {}).items():
                dropped[kind] = dropped.get(kind, 0) + count
        return build_response(final, [state.assembled() for state in states],
                              fallback_id=self.interaction_id, dropped=dropped,
                              images=[state.images or () for state in states])

    def _note(self, interaction: Any) -> None:
        if isinstance(interaction, Mapping):
            self._interaction_id = text_of(interaction.get("id")) or self._interaction_id
            self._model = text_of(interaction.get("model")) or self._model

    def _state(self, frame: JsonObject) -> _StepState:
        index = frame.get("index")
        key = index if isinstance(index, int) else max(self._steps, default=-1)
        state = self._steps.get(key)
        if state is None:
            state = self._steps[key] = _StepState(step={})
        return state

    # --- handlers --------------------------------------------------------------------

    def _on_created(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        self._note(frame.get("interaction"))
        return ()

    def _on_status(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        self._interaction_id = text_of(frame.get("interaction_id")) or self._interaction_id
        return ()

    def _on_completed(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        interaction = frame.get("interaction")
        self._note(interaction)
        final = dict(interaction) if isinstance(interaction, Mapping) else {}
        if final.get("status") == "failed":
            raise failed_error(final)
        self.finished(final)
        return ()

    def _on_stop(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        if isinstance(usage := frame.get("usage"), Mapping):
            self._running = usage
        return ()

    def _on_error(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        raise stream_error_event(frame)

    def _on_legacy(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        what = f"event {frame.get(self.TYPE_KEY)!r}"
        raise legacy_format_error(what)

    def _on_start(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        step = frame.get("step")
        state = self._state(frame)
        was_call = state.kind == "function_call"
        state.step = dict(step) if isinstance(step, Mapping) else {}
        if state.kind == "function_call" and not was_call:
            self.call_limit.begin(PROVIDER)
        images: Sequence[ProviderEvent] = ()
        if state.kind == "model_output":  # its images kept apart, audio blocks counted
            images = self._images(state, take_images(state.step))
            state.dropped = drop_media(state.step, state.dropped)
        # A step may arrive complete in step.start: its text streams now, and later
        # deltas (if any) extend it.
        text = content_text(state.step.get("content"))
        if text and state.kind == "model_output":
            state.text.append(text)
            return (text_delta(text), *images)
        if images:
            return images
        summary = content_text(state.step.get("summary"))
        if summary and state.kind == "thought":
            state.summary.append(summary)
            return (reasoning_delta(summary),)
        return ()

    def _on_delta(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        delta = frame.get("delta")
        if not isinstance(delta, Mapping):
            return ()
        state = self._state(frame)
        explicit = text_of(delta.get("type"))
        if (explicit or state.kind) in SERVER_STEP_TYPES:
            merge_step_delta(state.step, delta)
            return ()
        kind = explicit or _infer_delta_type(delta)
        if not state.kind and kind in _STARTED_BY:  # its step.start never came: the
            state.step["type"] = _STARTED_BY[kind]  # step the delta implies, kept as shown
        if kind == "text":
            text = text_of(delta.get("text")) or ""
            if state.kind == "thought":
                state.summary.append(text)
                return (reasoning_delta(text),) if text else ()
            state.text.append(text)
            if type(delta.get("annotations")) is list and delta["annotations"]:  # older shape
                state.annotations = [*(state.annotations or ()), *delta["annotations"]]
            return (text_delta(text),) if text else ()
        if kind == "arguments_delta":
            state.arguments.append(text_of(delta.get("arguments")) or "")
        elif kind == "thought_signature":
            state.signature = (state.signature or "") + (text_of(delta.get("signature")) or "")
        elif kind == "text_annotation_delta" and type(delta.get("annotations")) is list:
            state.annotations = [*(state.annotations or ()), *delta["annotations"]]
        elif kind == "thought_summary":
            text = content_text([delta.get("content")])
            state.summary.append(text)
            return (reasoning_delta(text),) if text else ()
        elif kind == "image":  # a whole image (the shape of an image content block)
            return self._images(state, [delta])
        elif kind:  # ``audio``, ...: no part holds them; the audit counts them
            state.dropped = state.dropped or {}
            state.dropped[kind] = state.dropped.get(kind, 0) + 1
        return ()

    def _images(self, state: _StepState, blocks: Sequence[Mapping[str, Any]]
                ) -> Sequence[ProviderEvent]:
        """``blocks`` (image content or deltas) kept on ``state`` within the response's
        limit (``OutputMedia``), an ``ImageOutput`` each kept image; one past the limit
        or unusable is its placeholder text, kept and not streamed."""
        out: list[ProviderEvent] = []
        for block in blocks:
            part = self._media.image(block.get("mime_type"), block.get("data"))
            state.images = [*(state.images or ()), part]
            if isinstance(part, ImagePart):
                out.append(ImageOutput(part=part))
        return tuple(out)


_STARTED_BY = {"text": "model_output", "thought_summary": "thought", "image": "model_output",
               "thought_signature": "thought"}
"""The step a delta implies when its own ``step.start`` never came (a step with no
type becomes no part: its streamed text was shown and not kept)."""


def _infer_delta_type(delta: Mapping[str, Any]) -> str:
    for key, kind in (("signature", "thought_signature"), ("arguments", "arguments_delta"),
                      ("text", "text")):
        if key in delta:
            return kind
    return ""


_Handler = Callable[[InteractionsStreamParser, JsonObject], Sequence[ProviderEvent]]
_HANDLERS: Mapping[str, _Handler] = {
    "interaction.created": InteractionsStreamParser._on_created,
    "interaction.status_update": InteractionsStreamParser._on_status,
    "interaction.completed": InteractionsStreamParser._on_completed,
    "error": InteractionsStreamParser._on_error,
    "step.start": InteractionsStreamParser._on_start,
    "step.delta": InteractionsStreamParser._on_delta,
    "step.stop": InteractionsStreamParser._on_stop,
    **dict.fromkeys(LEGACY_EVENTS, InteractionsStreamParser._on_legacy),
}
InteractionsStreamParser.handle(_HANDLERS)
