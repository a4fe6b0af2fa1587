"""Gemini Interactions responses assembled from steps (a stream's or a body's), and the
typed failures of a failed interaction and of the legacy ``outputs`` format (moved out
of ``_parser``, which re-exports them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from turnstate.core._citations import Citation
from turnstate.core._conversation import Part, ReasoningPart, TextPart, ToolCallPart
from turnstate.core._cost import server_tool_metadata, tier_metadata
from turnstate.core._errors import FatalProviderError, ProviderError, ProviderProtocolError
from turnstate.core._json import compact_json
from turnstate.core._media_output import OutputMedia
from turnstate.providers._citations import gemini_citation, read_citations, shifted
from turnstate.providers._frames import text_of
from turnstate.providers._opaque import opaque_part
from turnstate.providers._protocol import ProviderResponse
from turnstate.providers.gemini_interactions._errors import PROVIDER, classify_fields
from turnstate.providers.gemini_interactions._status import finish_reason
from turnstate.providers.gemini_interactions._steps_wire import SERVER_CALL_STEPS, usage_of

__all__ = ["DROPPED_KEY", "INPUT_STEPS", "LEGACY_EVENTS", "TEXT_SIGNATURE", "build_response",
           "content_text", "drop_media", "failed_error", "image_blocks",
           "legacy_format_error", "parse_response_body", "step_part", "step_parts",
           "take_images", "text_part"]


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
    final: Mapping[str, Any], steps: Sequence[Mapping[str, Any]], *, fallback_id: str | None,
    dropped: Mapping[str, int] | None = None, images: Sequence[Sequence[Part]] | None = None,
) -> ProviderResponse:
    """The response of these steps; ``dropped`` counts the streamed deltas no part holds
    (``audio``...), added to the steps' own such content blocks (``DROPPED_KEY``).
    ``images`` are each step's generated images as a stream kept them (its blocks taken
    out of the step); without them a ``model_output``'s image blocks are read here
    (``OutputMedia``). A step's images follow its text, before its signature."""
    model = (text_of(final.get("model")) or "").removeprefix("models/")
    parts: list[Part] = []
    counts = dict(dropped or {})
    media = OutputMedia()
    for at, step in enumerate(steps):
        made: Sequence[Part] = images[at] if images is not None and at < len(images) else ()
        if step.get("type") == "model_output":
            if images is None:
                made = [media.image(block.get("mime_type"), block.get("data"))
                        for block in image_blocks(step)]
            counts = drop_media(step, counts, strip=False) or counts
        own = step_parts(step, model)
        if made and own and isinstance(own[-1], ReasoningPart) \
                and own[-1].kind == TEXT_SIGNATURE:  # the step's signature stays last
            own = (*own[:-1], *made, own[-1])
        else:
            own = (*own, *made)
        parts.extend(own)
    metadata = {**tier_metadata(final.get("service_tier")), **server_tool_metadata(sum(
        1 for step in steps if text_of(step.get("type")) in SERVER_CALL_STEPS))}
    if counts:
        metadata[DROPPED_KEY] = dict(sorted(counts.items()))
    return ProviderResponse(
        response_id=text_of(final.get("id")) or fallback_id,
        parts=parts,
        usage=usage_of(final.get("usage")),
        finish_reason=finish_reason(text_of(final.get("status")), parts),
        metadata=metadata,
        raw_finish_reason=text_of(final.get("status")),
    )


DROPPED_KEY = "droppedOutput"
"""The audit metadata key counting, by type, the model output no part holds (a
``model_output``'s ``audio`` content or deltas, and any other media type but ``image``:
the conversation has an image part only): dropped, not silently (wire8; images are
kept since wire12)."""


def drop_media(step: Any, counts: dict[str, int] | None, *,
               strip: bool = True) -> dict[str, int] | None:
    """``counts`` plus the step's non-text content blocks by type (None when there are
    none and ``counts`` is None); with ``strip`` they are taken out of the (mutable) step."""
    content = step.get("content")
    if not isinstance(content, list):
        return counts
    kept = []
    for block in content:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind in _KEPT_BLOCKS or not isinstance(kind, str) or not kind:
            kept.append(block)
            continue
        counts = counts if counts is not None else {}
        counts[kind] = counts.get(kind, 0) + 1
    if strip and len(kept) != len(content):
        step["content"] = kept
    return counts


_KEPT_BLOCKS = frozenset({"text", "image"})
"""A ``model_output``'s content blocks some part holds (``drop_media`` counts the rest)."""


def image_blocks(step: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The image content blocks of a ``model_output`` step, in order."""
    content = step.get("content")
    return [block for block in content if isinstance(block, Mapping)
            and block.get("type") == "image"] if isinstance(content, list) else []


def take_images(step: dict[str, Any]) -> list[Mapping[str, Any]]:
    """``image_blocks`` of a (mutable) streamed step, taken out of its content: the
    stream keeps each image as a part at once, and the step keeps its text."""
    blocks = image_blocks(step)
    if blocks:
        step["content"] = [block for block in step["content"]
                           if not (isinstance(block, Mapping) and block.get("type") == "image")]
    return blocks


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
    text = content_text(step.get("content"))
    mark = ReasoningPart(provider=PROVIDER, model=model, kind=TEXT_SIGNATURE,
                         signature=signature)
    return (text_part(text, step.get("content")), mark) if text else (mark,)


def step_part(step: Mapping[str, Any], model: str) -> Part | None:
    """The part a model-generated step becomes (None for steps that carry nothing)."""
    kind = text_of(step.get("type"))  # a list or an object is no step type
    signature = text_of(step.get("signature")) or None
    if kind == "model_output":
        text = content_text(step.get("content"))
        return text_part(text, step.get("content")) if text else None
    if kind == "function_call":
        arguments = step.get("arguments")
        text = arguments if isinstance(arguments, str) else compact_json(arguments or {})
        if not (name := text_of(step.get("name"))):  # no tool to run (attack3)
            raise ProviderProtocolError(PROVIDER, f"function_call {step.get('id')!r} has no name")
        return ToolCallPart(call_id=text_of(step.get("id")) or "", name=name, arguments=text,
                            provider=PROVIDER, model=model, signature=signature)
    if kind == "thought":
        summary = content_text(step.get("summary"))
        if signature is None and not summary:
            return None
        return ReasoningPart(provider=PROVIDER, model=model, kind="thought", text=summary,
                             signature=signature)
    if not kind or kind in INPUT_STEPS:
        return None
    return opaque_part(PROVIDER, model, dict(step))


def text_part(text: str, content: Any) -> TextPart:
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


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, Mapping) and isinstance(block.get("text"), str):
            texts.append(block["text"])
    return "".join(texts)
