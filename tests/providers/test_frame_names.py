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
    undecoded, every other frame is decoded once, and the text is the same."""
    decoded: list[str] = []
    real = _frames.load_frame

    def counting(provider: str, event: SseEvent) -> Any:
        decoded.append(event.event)
        return real(provider, event)

    monkeypatch.setattr(_frames, "load_frame", counting)
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
    assert decoded == [f["type"] for f in frames if "content_part" not in f["type"]]


ID_ONLY = {
    # parser factory, the frame that names the id, the id-only frame name
    "responses": (ResponsesStreamParser,
                  {"type": "response.created", "response": {"id": "resp_1", "model": "m"}},
                  ["response.in_progress", "response.queued"]),
    "interactions": (InteractionsStreamParser,
                     {"event_type": "interaction.created",
                      "interaction": {"id": "v1_1", "model": "m"}},
                     ["interaction.status_update"]),
}


@pytest.mark.parametrize("name", ID_ONLY)
def test_id_only_frames_are_skipped_once_the_id_is_known(name: str) -> None:
    """Frames that only repeat the response's id (Responses' ``in_progress`` after
    ``created``, Gemini's ``status_update``) are decoded until the id is known, and
    skipped undecoded after (a cursor turn's second large frame: issue 26)."""
    make, created, skipped = ID_ONLY[name]
    for event in skipped:
        with pytest.raises(ProviderProtocolError):
            make().feed(SseEvent(event=event, data=BROKEN))
    parser = make()
    kind = created.get("type") or created["event_type"]
    assert parser.feed(SseEvent(event=kind, data=json.dumps(created))) == ()
    for event in skipped:
        assert parser.feed(SseEvent(event=event, data=BROKEN)) == ()
    with pytest.raises(ProviderProtocolError):  # unnamed, it is still decoded
        parser.feed(SseEvent(data=BROKEN))
    assert make().feed(SseEvent(event=kind, data=json.dumps(created))) == ()  # per parser


@pytest.mark.parametrize("data", [
    '{"type":"x","n":1}', ' {"type":"x"}', '{"type":"x"} ', '\n{"a":[1,2.5,null]}\t',
    '{"a":NaN}', '{"a":"\\u00e9"}', '{}'])
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
