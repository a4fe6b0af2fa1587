"""Gemini Interactions stream parsing (the current "steps" format).

Events (providers-wire.md 2.5): ``interaction.created`` names the interaction (the new
cursor); ``step.start`` opens step ``index`` (a ``thought``, ``model_output`` or
``function_call``; a function call may carry its complete ``arguments`` here);
``step.delta`` adds ``text``, ``arguments_delta`` (partial JSON, concatenated),
``thought_signature``, ``thought_summary`` or ``text_annotation_delta`` (a text delta
may also carry ``annotations`` itself, the shape before that delta type: both are read,
spans of the step's whole text); ``step.stop`` closes the step;
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

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import attrs

from turnstate.core._citations import Citation
from turnstate.core._conversation import (
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    Usage,
)
from turnstate.core._cost import server_tool_metadata, tier_metadata
from turnstate.core._errors import FatalProviderError, ProviderError, ProviderProtocolError
from turnstate.core._json import JsonObject, compact_json
from turnstate.providers._citations import gemini_citation, read_citations, shifted
from turnstate.providers._frames import FrameDispatcher, text_of
from turnstate.providers._opaque import opaque_part
from turnstate.providers._protocol import (
    ProviderEvent,
    ProviderResponse,
    reasoning_delta,
    text_delta,
)
from turnstate.providers.gemini_interactions._errors import (
    PROVIDER,
    classify_fields,
    stream_error_event,
)
from turnstate.providers.gemini_interactions._status import finish_reason
from turnstate.providers.gemini_interactions._steps_wire import (
    SERVER_CALL_STEPS,
    SERVER_STEP_TYPES,
    merge_step_delta,
    usage_of,
)

__all__ = ["SERVER_CALL_STEPS", "SERVER_STEP_TYPES", "TEXT_SIGNATURE",
           "InteractionsStreamParser", "merge_step_delta", "parse_response_body", "usage_of"]


@attrs.define
class _StepState:
    """One step as the stream builds it."""

    step: JsonObject
    text: list[str] = attrs.field(factory=list)
    arguments: list[str] = attrs.field(factory=list)
    summary: list[str] = attrs.field(factory=list)
    signature: str | None = None
    annotations: list[Any] | None = None  # ``text_annotation_delta``s: rare

    @property
    def kind(self) -> str:
        return text_of(self.step.get("type")) or ""

    def assembled(self) -> JsonObject:
        """The step as a complete (non-streaming) step object."""
        step = dict(self.step)
        if self.text and (self.annotations or _content_text(step.get("content"))
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
    KEPT: ClassVar[frozenset[str]] = frozenset({"interaction.status_update"})
    """Frames that only repeat the interaction's id: decoded only if no other frame
    named it."""
    # HANDLERS is set after the class body, once its methods exist (``handle``).

    def __init__(self) -> None:
        self._interaction_id: str | None = None
        self._model = ""
        self._steps: dict[int, _StepState] = {}
        self._final: JsonObject | None = None

    @property
    def interaction_id(self) -> str | None:
        """The interaction's id: as the created and completed frames name it, else the
        newest ``KEPT`` status frame's (decoded now)."""
        if self._interaction_id is None:
            for frame in self.kept_frames():
                if found := text_of(frame.get("interaction_id")):
                    return found
        return self._interaction_id

    def billed(self) -> Usage | None:
        """What the request billed when its terminal frame came but made no answer (a
        ``cancelled`` or unfinished interaction: ``finish`` raises): that frame's usage;
        None before it."""
        return None if self._final is None else usage_of(self._final.get("usage"))

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
                cited += _text_part(_content_text(step.get("content")),
                                    step.get("content")).citations
        return cited

    def finish(self) -> ProviderResponse:
        final = {"model": self._model, **self.final_frame()}
        steps = [self._steps[index].assembled() for index in sorted(self._steps)]
        return build_response(final, steps, fallback_id=self.interaction_id)

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

    def _on_error(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        raise stream_error_event(frame)

    def _on_legacy(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        what = f"event {frame.get(self.TYPE_KEY)!r}"
        raise legacy_format_error(what)

    def _on_start(self, frame: JsonObject) -> Sequence[ProviderEvent]:
        step = frame.get("step")
        state = self._state(frame)
        state.step = dict(step) if isinstance(step, Mapping) else {}
        # A step may arrive complete in step.start: its text streams now, and later
        # deltas (if any) extend it.
        text = _content_text(state.step.get("content"))
        if text and state.kind == "model_output":
            state.text.append(text)
            return (text_delta(text),)
        summary = _content_text(state.step.get("summary"))
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
            text = _content_text([delta.get("content")])
            state.summary.append(text)
            return (reasoning_delta(text),) if text else ()
        return ()


_STARTED_BY = {"text": "model_output", "thought_summary": "thought",
               "thought_signature": "thought"}
"""The step a delta implies when its own ``step.start`` never came (a step with no
type becomes no part: its streamed text was shown and not kept)."""


def _infer_delta_type(delta: Mapping[str, Any]) -> str:
    for key, kind in (("signature", "thought_signature"), ("arguments", "arguments_delta"),
                      ("text", "text")):
        if key in delta:
            return kind
    return ""


LEGACY_EVENTS = ("interaction.start", "content.start", "content.delta", "content.stop",
                 "interaction.complete")
"""The legacy format's SSE events (GENAI-PY before 2026-05-06, providers-wire.md 2.6);
none of them is a current event's name (``interaction.status_update`` and ``error``
are both formats')."""


def legacy_format_error(what: str) -> ProviderProtocolError:
    """The typed failure of a frame or body in the legacy ``outputs`` format."""
    msg = (f"{what} is the legacy Interactions format (outputs / content.*, removed "
           "2026-06-08); only the steps format is read (a relay or server pinned to an old "
           "Api-Revision?)")
    return ProviderProtocolError(PROVIDER, msg)


_Handler = Callable[[InteractionsStreamParser, JsonObject], Sequence[ProviderEvent]]
_HANDLERS: Mapping[str, _Handler] = {
    "interaction.created": InteractionsStreamParser._on_created,
    "interaction.status_update": InteractionsStreamParser._on_status,
    "interaction.completed": InteractionsStreamParser._on_completed,
    "error": InteractionsStreamParser._on_error,
    "step.start": InteractionsStreamParser._on_start,
    "step.delta": InteractionsStreamParser._on_delta,
    **dict.fromkeys(LEGACY_EVENTS, InteractionsStreamParser._on_legacy),
}
InteractionsStreamParser.handle(_HANDLERS)


# --- assembling the response (shared with non-streaming bodies) ----------------------


def failed_error(interaction: Mapping[str, Any]) -> ProviderError:
    """The first of a failed interaction's ``errors``, classified."""
    errors = interaction.get("errors")
    first = errors[0] if isinstance(errors, list) and errors else None
    if isinstance(first, Mapping):
        return classify_fields(None, {}, first)
    return FatalProviderError(PROVIDER, "the interaction failed without an error object")


def parse_response_body(body: Mapping[str, Any]) -> ProviderResponse:
    """A non-streaming ``POST /interactions`` body as a response.

    Raises:
        ProviderError: the interaction failed.
        ProviderProtocolError: the body is in the legacy ``outputs`` format.
    """
    if body.get("status") == "failed":
        raise failed_error(body)
    steps = body.get("steps")
    if steps is None and isinstance(body.get("outputs"), list):
        what = "a body with outputs and no steps"
        raise legacy_format_error(what)
    items = [s for s in steps if isinstance(s, Mapping)] if isinstance(steps, list) else []
    return build_response(body, items, fallback_id=None)


def build_response(
    final: Mapping[str, Any], steps: Sequence[Mapping[str, Any]], *, fallback_id: str | None
) -> ProviderResponse:
    model = (text_of(final.get("model")) or "").removeprefix("models/")
    parts: list[Part] = []
    for step in steps:
        parts.extend(step_parts(step, model))
    return ProviderResponse(
        response_id=text_of(final.get("id")) or fallback_id,
        parts=parts,
        usage=usage_of(final.get("usage")),
        finish_reason=finish_reason(text_of(final.get("status")), parts),
        metadata={**tier_metadata(final.get("service_tier")), **server_tool_metadata(sum(
            1 for step in steps if step.get("type") in SERVER_CALL_STEPS))},
        raw_finish_reason=text_of(final.get("status")),
    )


INPUT_STEPS = frozenset({"user_input", "function_result"})
"""Steps that echo the request's input (a stored GET includes them): not model output."""


TEXT_SIGNATURE = "text_signature"
"""The ``ReasoningPart.kind`` of a thought signature on a ``model_output`` step: kept
after the step's text, sent back on that step only to the same provider and model."""


def step_parts(step: Mapping[str, Any], model: str) -> tuple[Part, ...]:
    """The parts a model-generated step becomes: its text then, when the step is signed,
    a ``text_signature`` reasoning part; otherwise ``step_part``'s one part, or none."""
    signature = text_of(step.get("signature")) or None
    if step.get("type") != "model_output" or signature is None:
        part = step_part(step, model)
        return () if part is None else (part,)
    text = _content_text(step.get("content"))
    mark = ReasoningPart(provider=PROVIDER, model=model, kind=TEXT_SIGNATURE,
                         signature=signature)
    return (_text_part(text, step.get("content")), mark) if text else (mark,)


def step_part(step: Mapping[str, Any], model: str) -> Part | None:
    """The part a model-generated step becomes (None for steps that carry nothing)."""
    kind = step.get("type")
    signature = text_of(step.get("signature")) or None
    if kind == "model_output":
        text = _content_text(step.get("content"))
        return _text_part(text, step.get("content")) if text else None
    if kind == "function_call":
        arguments = step.get("arguments")
        text = arguments if isinstance(arguments, str) else compact_json(arguments or {})
        if not (name := text_of(step.get("name"))):  # no tool to run (attack3)
            raise ProviderProtocolError(PROVIDER, f"function_call {step.get('id')!r} has no name")
        return ToolCallPart(call_id=text_of(step.get("id")) or "", name=name, arguments=text,
                            provider=PROVIDER, model=model, signature=signature)
    if kind == "thought":
        summary = _content_text(step.get("summary"))
        if signature is None and not summary:
            return None
        return ReasoningPart(provider=PROVIDER, model=model, kind="thought", text=summary,
                             signature=signature)
    if not kind or kind in INPUT_STEPS:
        return None
    return opaque_part(PROVIDER, model, dict(step))


def _text_part(text: str, content: Any) -> TextPart:
    """A model output's text with its blocks' annotations (spans in bytes, a later
    block's moved by the bytes of the text before it)."""
    cited: tuple[Citation, ...] = ()
    offset = 0
    for block in content if isinstance(content, list) else []:
        if isinstance(block, Mapping) and isinstance(block.get("text"), str):
            if block.get("annotations"):
                cited += shifted(read_citations(block["annotations"], gemini_citation), offset)
            offset += len(block["text"].encode("utf-8", "surrogatepass"))
    return TextPart(text=text, citations=cited)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, Mapping) and isinstance(block.get("text"), str):
            texts.append(block["text"])
    return "".join(texts)
