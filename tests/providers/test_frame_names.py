"""Parsers judge a named frame by its ``event:`` line before decoding it (issue 26):
frames they have no use for are skipped unparsed, and everything they use is decoded
and dispatched as before."""

from __future__ import annotations

import json
from typing import Any

import pytest

from turnstate.core._errors import ProviderProtocolError
from turnstate.providers import _frames
from turnstate.providers._protocol import SseEvent, TextDelta
from turnstate.providers.anthropic import AnthropicStreamParser
from turnstate.providers.gemini_interactions import InteractionsStreamParser
from turnstate.providers.openai_responses import ResponsesStreamParser

BROKEN = "{not json"

PARSERS: dict[str, tuple[Any, list[str], str]] = {
    # parser factory, names it has no use for, a name it reads
    "responses": (ResponsesStreamParser, ["response.content_part.added",
                                          "response.content_part.done"],
                  "response.output_text.delta"),
    "anthropic": (AnthropicStreamParser, ["ping", "content_block_stop"],
                  "content_block_delta"),
    "interactions": (InteractionsStreamParser, ["step.stop"], "step.delta"),
}


@pytest.mark.parametrize("name", PARSERS)
def test_unused_named_frames_are_never_decoded(name: str) -> None:
    """A frame named for something the parser ignores passes even when its data is not
    JSON (it was never decoded); the same data unnamed, or under a name the parser
    reads, is still a protocol error."""
    make, ignored, used = PARSERS[name]
    parser = make()
    for event in ignored:
        assert parser.feed(SseEvent(event=event, data=BROKEN)) == ()
    for event in ("message", used):
        with pytest.raises(ProviderProtocolError):
            make().feed(SseEvent(event=event, data=BROKEN))


def test_a_cursor_turn_decodes_only_the_frames_it_uses(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The Responses stream of a short answer: the two content_part frames are skipped
    undecoded, ``response.created`` is kept undecoded (the terminal frame names the
    response), every other frame is decoded once, and the text is the same."""
    decoded: list[str] = []
    real = _frames._scan  # every decoding goes through the C scanner (load_frame's too)

    def counting(data: str, index: int) -> Any:
        frame, end = real(data, index)
        decoded.append(frame["type"])
        return frame, end

    monkeypatch.setattr(_frames, "_scan", counting)
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    item = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "Hi there", "annotations": []}]}
    head = {"id": "resp_1", "model": "gpt-4o", "status": "in_progress", "output": []}
    frames = [
        {"type": "response.created", "response": head},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**item, "content": [], "status": "in_progress"}},
        {"type": "response.content_part.added", **where, "part": {"type": "output_text"}},
        {"type": "response.output_text.delta", **where, "delta": "Hi"},
        {"type": "response.output_text.delta", **where, "delta": " there"},
        {"type": "response.content_part.done", **where, "part": {"type": "output_text"}},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {**head, "status": "completed",
                                                     "output": [item]}},
    ]
    parser = ResponsesStreamParser()
    events = [e for f in frames
              for e in parser.feed(SseEvent(event=f["type"], data=json.dumps(f)))]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hi there"
    assert parser.done and parser.finish().response_id == "resp_1"
    assert decoded == [f["type"] for f in frames
                       if "content_part" not in f["type"] and f["type"] != "response.created"]


KEPT = {
    # parser factory, the frames kept undecoded, the terminal frame, the id it names
    "responses": (ResponsesStreamParser,
                  ["response.created", "response.in_progress", "response.queued"],
                  {"type": "response.completed",
                   "response": {"id": "resp_9", "model": "m", "status": "completed",
                                "output": []}},
                  "resp_9"),
    "interactions": (InteractionsStreamParser, ["interaction.status_update"],
                     {"event_type": "interaction.completed",
                      "interaction": {"id": "v1_9", "model": "m", "status": "completed",
                                      "outputs": []}},
                     "v1_9"),
}


def _head(name: str, frame: str, rid: str) -> SseEvent:
    body = ({"type": frame, "response": {"id": rid, "model": "m"}} if name == "responses"
            else {"event_type": frame, "interaction_id": rid})
    return SseEvent(event=frame, data=json.dumps(body))


@pytest.mark.parametrize("name", KEPT)
def test_frames_that_only_name_the_response_are_decoded_only_when_needed(
        name: str) -> None:
    """Responses' ``created``/``in_progress``/``queued`` and Gemini's ``status_update``
    name nothing the terminal frame does not: they are kept undecoded (issue 26: the
    head frames echo the instructions and tools), and decoded only when the terminal
    frame names no id."""
    make, kept, terminal, rid = KEPT[name]
    kind = terminal.get("type") or terminal["event_type"]
    parser = make()
    for event in kept:
        assert parser.feed(SseEvent(event=event, data=BROKEN)) == ()
    assert parser.feed(SseEvent(event=kind, data=json.dumps(terminal))) == ()
    assert parser.done and parser.finish().response_id == rid  # the kept: never decoded
    with pytest.raises(ProviderProtocolError):  # unnamed, such a frame is decoded at once
        make().feed(SseEvent(data=BROKEN))

    anonymous = json.loads(json.dumps(terminal))
    (anonymous.get("response") or anonymous["interaction"]).pop("id")
    parser = make()
    for number, event in enumerate(kept):  # the newest kept frame names the response
        assert parser.feed(_head(name, event, f"{rid}_{number}")) == ()
    assert parser.feed(SseEvent(event=kind, data=json.dumps(anonymous))) == ()
    assert parser.finish().response_id == f"{rid}_{len(kept) - 1}"

    parser = make()
    parser.feed(SseEvent(event=kept[0], data=BROKEN))
    parser.feed(SseEvent(event=kind, data=json.dumps(anonymous)))
    with pytest.raises(ProviderProtocolError, match="malformed frame"):
        parser.finish()  # a kept frame that is needed and broken still fails the call


@pytest.mark.parametrize("data", [
    '{"type":"x","n":1}', ' {"type":"x"}', '{"type":"x"} ', '\n{"a":[1,2.5,null]}\t',
    '{"a":"\\u00e9"}', '{}'])  # NaN: malformed (test_attack7_frames)
def test_a_frame_decodes_as_json_loads_does(data: str) -> None:
    """The C scanner path and ``json.loads`` give the same object."""
    assert _frames.load_frame("p", SseEvent(data=data)) == json.loads(data)


@pytest.mark.parametrize(("data", "message"), [
    ("{not json", "malformed frame"), ('{"a":1}x', "malformed frame"),
    ('{"a":1}{"b":2}', "malformed frame"), ("\ufeff{}", "malformed frame"), ("", "malformed"),
    ("[1]", "not a JSON object"), ('"text"', "not a JSON object"), ("3", "not a JSON object"),
    (" [1] ", "not a JSON object")])
def test_a_bad_frame_fails_as_before(data: str, message: str) -> None:
    with pytest.raises(ProviderProtocolError, match=message):
        _frames.load_frame("p", SseEvent(data=data))


def test_anthropic_message_stop_is_never_decoded() -> None:
    """``message_stop`` says all it says by its name (Bedrock's invocation metrics in
    its data are read by nobody): the parser is done without decoding it; unnamed, the
    frame is decoded and ends the stream as before."""
    parser = AnthropicStreamParser()
    assert parser.feed(SseEvent(event="message_stop", data=BROKEN)) == ()
    assert parser.done
    unnamed = AnthropicStreamParser()
    assert unnamed.feed(SseEvent(data='{"type":"message_stop"}')) == () and unnamed.done
    with pytest.raises(ProviderProtocolError):
        AnthropicStreamParser().feed(SseEvent(data=BROKEN))
