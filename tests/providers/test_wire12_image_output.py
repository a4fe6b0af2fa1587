"""wire12: an image a Gemini model generates is kept as an ``ImagePart`` of the answer
(streamed as ``ImageOutput``, bounded by ``OutputMedia``), and replayed to Gemini as
model content; audio is still counted in ``droppedOutput`` (no part holds it)."""

from __future__ import annotations

import base64
import json
from typing import Any

from tests.conftest import DATA_DIR
from turnstate.core._conversation import ReasoningPart, TextPart
from turnstate.core._media import ImagePart
from turnstate.core._media_output import OutputMedia
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers import ImageOutput, SseEvent, TextDelta
from turnstate.providers._sse import SseDecoder
from turnstate.providers.gemini_interactions import InteractionsStreamParser, parse_response_body
from turnstate.providers.gemini_interactions._codec import model_steps

STREAM = DATA_DIR / "gemini-interactions" / "image-output.sse"
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ"
                       "/pLvAAAAAElFTkSuQmCC")
MODEL = DEFAULT_REGISTRY.model("gemini", "gemini-2.5-flash")


def _image_block(data: bytes = PNG, kind: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "data": base64.b64encode(data).decode(), "mime_type": kind}


def test_a_streamed_image_is_an_event_and_a_part_before_the_signature() -> None:
    parser = InteractionsStreamParser()
    events: list[Any] = []
    for frame in SseDecoder().feed(STREAM.read_bytes()):
        events.extend(parser.feed(frame))
    response = parser.finish()
    assert [type(e) for e in events] == [TextDelta, ImageOutput]
    assert events[1].part == ImagePart(media_type="image/png", data=PNG)
    assert response.parts == (
        TextPart(text="Here is a red dot."), ImagePart(media_type="image/png", data=PNG),
        ReasoningPart(provider="gemini", model="gemini-3-pro-image-preview",
                      kind="text_signature", signature="c2lnLWltYWdl"))
    assert response.metadata.get("droppedOutput") == {"audio": 1}  # audio: no part yet
    assert response.finish_reason == "stop"


def test_an_image_in_a_step_start_and_in_a_body_is_kept() -> None:
    parser = InteractionsStreamParser()
    head = {"event_type": "step.start", "index": 0, "step": {
        "type": "model_output", "content": [{"type": "text", "text": "A:"}, _image_block()]}}
    events = parser.feed(SseEvent(event="step.start", data=json.dumps(head)))
    assert [type(e) for e in events] == [TextDelta, ImageOutput]
    parser.feed(SseEvent(event="interaction.completed", data=json.dumps({
        "event_type": "interaction.completed",
        "interaction": {"id": "v1_w12", "status": "completed"}})))
    kept = (TextPart(text="A:"), ImagePart(media_type="image/png", data=PNG))
    assert parser.finish().parts == kept
    body = parse_response_body({"id": "v1_w12b", "status": "completed", "steps": [
        {"type": "model_output", "content": [{"type": "text", "text": "A:"}, _image_block(),
                                             {"type": "audio", "data": "UklGRg=="}]}]})
    assert body.parts == kept and body.metadata["droppedOutput"] == {"audio": 1}


def test_output_media_is_bounded_and_checked() -> None:
    media = OutputMedia(limit=100)
    assert media.image("image/png", _image_block()["data"]) == ImagePart(
        media_type="image/png", data=PNG)
    over = media.image("image/png", _image_block()["data"])  # 69 + 69 > 100
    assert isinstance(over, TextPart) and "past the 100 bytes" in over.text
    for kind, data, said in (("image/png", "%%%", "not base64"),
                             ("image/jpeg", _image_block()["data"], "the bytes are an image/png"),
                             ("image/tiff", _image_block()["data"], "not one of"),
                             ("image/png", None, "no inline data")):
        part = OutputMedia().image(kind, data)
        assert isinstance(part, TextPart) and said in part.text, (kind, part)
    assert media.kept == len(PNG)


def test_an_unusable_streamed_image_is_its_placeholder_not_an_event() -> None:
    parser = InteractionsStreamParser()
    frame = {"event_type": "step.delta", "index": 0,
             "delta": {"type": "image", "data": "AAA", "mime_type": "image/png"}}
    assert parser.feed(SseEvent(event="step.delta", data=json.dumps(frame))) == ()
    parser.feed(SseEvent(event="interaction.completed", data=json.dumps({
        "event_type": "interaction.completed",
        "interaction": {"id": "v1_w12c", "status": "completed"}})))
    (part,) = parser.finish().parts
    assert isinstance(part, TextPart) and "generated image not kept" in part.text


def test_an_answer_image_is_replayed_as_model_content_with_its_signature() -> None:
    parts = (TextPart(text="Here:"), ImagePart(media_type="image/png", data=PNG),
             ReasoningPart(provider="gemini", model=MODEL.name, kind="text_signature",
                           signature="c2ln"))
    assert model_steps(parts, MODEL) == [{"type": "model_output", "signature": "c2ln",
                                          "content": [{"type": "text", "text": "Here:"},
                                                      _image_block()]}]
    alone = model_steps((ImagePart(media_type="image/png", data=PNG),), MODEL)
    assert alone == [{"type": "model_output", "content": [_image_block()]}]


def test_other_wires_replay_an_answer_image_as_a_line_of_text() -> None:
    from turnstate.providers.anthropic._blocks import render_parts_blocks
    from turnstate.providers.chat_completions._render import NO_REASONING, render_parts
    from turnstate.providers.openai_responses._codec import assistant_items

    parts = (TextPart(text="Here:"), ImagePart(media_type="image/png", data=PNG),
             TextPart(text="done"))
    said = f"Here:\n[the assistant generated an image here (image/png, {len(PNG)} bytes)]\ndone"
    openai = DEFAULT_REGISTRY.model("openai", "gpt-4o")
    assert [item["content"] for item in assistant_items(parts, openai)] == [said]
    assert [m["content"] for m in render_parts(parts, NO_REASONING)] == [said]
    ((role, blocks),) = render_parts_blocks(parts, None)
    assert role == "assistant" and [json.loads(b)["text"] for b in blocks] == [said]
