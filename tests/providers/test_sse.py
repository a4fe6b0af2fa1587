"""The incremental SSE decoder against the WHATWG event-stream rules."""

from __future__ import annotations

import sys
import types

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import chunkings, sse_lf_streams, sse_streams
from turnstate.providers import SseEvent
from turnstate.providers._protocol import (
    ReasoningDelta,
    TextDelta,
    reasoning_delta,
    sse_event,
    text_delta,
)
from turnstate.providers._sse import SseDecoder, SseLimitExceeded


def decode(*chunks: bytes) -> list[SseEvent]:
    decoder = SseDecoder()
    events: list[SseEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.close())
    return events


SAMPLE = (
    b"\xef\xbb\xbf: a comment first\r\n"
    b"event: response.created\r\n"
    b"id: 7\r\n"
    b'data: {"type":"response.created",\r\n'
    b'data:  "text":"h\xc3\xa9llo \xe2\x82\xac"}\r\n'
    b"\r\n"
    b"retry: 1500\n"
    b"data: second\n"
    b"\n"
    b"unknown: field\r"
    b"data: third\r"
    b"\r"
)
SAMPLE_EVENTS = [
    SseEvent(event="response.created", id="7",
             data='{"type":"response.created",\n "text":"héllo €"}'),
    SseEvent(data="second", id="7", retry=1500),
    SseEvent(data="third", id="7"),
]


def test_single_event_defaults_to_message() -> None:
    """A lone data line dispatched by a blank line is a ``message`` event."""
    assert decode(b"data: hello\n\n") == [SseEvent(data="hello")]


def test_event_name_applies_to_one_event_only() -> None:
    """The ``event`` field names its own event; the next one is ``message`` again."""
    events = decode(b"event: step.delta\ndata: 1\n\ndata: 2\n\n")
    assert [(e.event, e.data) for e in events] == [("step.delta", "1"), ("message", "2")]


def test_multi_line_data_is_joined_with_newlines() -> None:
    """Several data lines form one value with LF between them and no trailing LF."""
    assert decode(b"data: a\ndata: b\ndata:\n\n")[0].data == "a\nb\n"


def test_only_one_leading_space_is_removed() -> None:
    """``data:x`` and ``data: x`` are the same; a second space is part of the value."""
    assert [e.data for e in decode(b"data:x\n\ndata: x\n\ndata:  x\n\n")] == ["x", "x", " x"]


def test_field_without_colon_has_an_empty_value() -> None:
    """A bare ``data`` line appends an empty line, which still dispatches an event."""
    assert decode(b"data\n\n") == [SseEvent(data="")]


def test_id_persists_until_changed() -> None:
    """The last event id carries over to later events and survives events without one."""
    decoder = SseDecoder()
    events = decoder.feed(b"id: 1\ndata: a\n\ndata: b\n\nid: 2\ndata: c\n\n")
    assert [e.id for e in events] == ["1", "1", "2"]
    assert decoder.last_event_id == "2"


def test_id_with_nul_is_ignored_and_empty_id_resets() -> None:
    """An id containing NUL is ignored; an empty id sets the last event id to empty."""
    events = decode(b"id: 1\ndata: a\n\nid: x\x00y\ndata: b\n\nid\ndata: c\n\n")
    assert [e.id for e in events] == ["1", "1", ""]


def test_id_updates_even_when_no_event_is_dispatched() -> None:
    """A block with an id but no data sets the last event id without an event."""
    decoder = SseDecoder()
    assert decoder.feed(b"id: 42\n\n") == []
    assert decoder.last_event_id == "42"
    assert decoder.feed(b"data: x\n\n")[0].id == "42"


def test_retry_must_be_digits() -> None:
    """``retry`` with ASCII digits is reported; any other value is ignored."""
    events = decode(b"retry: 3000\ndata: a\n\nretry: 3s\ndata: b\n\n")
    assert [e.retry for e in events] == [3000, None]


def test_comments_are_ignored() -> None:
    """Lines starting with a colon are comments, also between data lines."""
    events = decode(b": keep-alive\n\ndata: a\n: note\ndata: b\n\n:\n\n")
    assert events == [SseEvent(data="a\nb")]


def test_unknown_fields_are_ignored() -> None:
    """Fields other than event, data, id and retry change nothing (names are exact)."""
    assert decode(b"foo: bar\nData: no\ndata: yes\n\n") == [SseEvent(data="yes")]


def test_empty_data_is_not_dispatched() -> None:
    """A block without a data line dispatches nothing, and resets the event name."""
    assert decode(b"event: lonely\n\nretry: 5\n\ndata: x\n\n") == [SseEvent(data="x")]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending_gives_the_same_events(newline: bytes) -> None:
    """LF, CRLF and a lone CR all end lines."""
    stream = newline.join([b"event: e", b"data: a", b"data: b", b"", b"data: c", b"", b""])
    assert decode(stream) == [SseEvent(event="e", data="a\nb"), SseEvent(data="c")]


def test_cr_at_chunk_end_waits_for_a_possible_lf() -> None:
    """A CR ending a chunk and an LF starting the next are one line end, not two."""
    events = decode(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n")
    assert events == [SseEvent(data="a\nb")]


def test_lone_cr_at_the_end_of_a_chunk_ends_its_line_at_once() -> None:
    """A CR ends its line when it arrives (here, the dispatching blank line); an LF that
    starts the next chunk completes that CRLF and is not a line of its own."""
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\r\r") == [SseEvent(data="a")]
    assert decoder.feed(b"\ndata: b\r") == []
    assert decoder.feed(b"\n\r\n") == [SseEvent(data="b")]
    assert decoder.close() == []


def test_unterminated_event_is_dropped_at_close() -> None:
    """An event the stream never finished with a blank line is not dispatched."""
    assert decode(b"data: complete\n\ndata: cut off") == [SseEvent(data="complete")]


def test_bom_is_stripped_only_at_the_start() -> None:
    """A leading BOM is dropped (also when split); a later one makes an unknown field."""
    bom = b"\xef\xbb\xbf"
    assert decode(bom[:1], bom[1:] + b"data: a\n\n") == [SseEvent(data="a")]
    assert decode(b"data: a\n\n" + bom + b"data: b\n\n") == [SseEvent(data="a")]


def test_utf8_split_inside_a_character() -> None:
    """A multi-byte character cut between chunks is decoded once complete."""
    euro = "€".encode()
    assert decode(b"data: " + euro[:1], euro[1:2], euro[2:] + b"\n\n") == [SseEvent(data="€")]


def test_a_character_split_between_buffer_views_decodes() -> None:
    """Any bytes-like chunk is taken (as codecs' incremental decoder took it): a
    character cut between two ``memoryview`` chunks decodes once complete, and the
    decoder keeps no view of a buffer the caller then reuses."""
    decoder = SseDecoder()
    buffer = bytearray(b"data: \xe2\x82")
    assert decoder.feed(memoryview(buffer)) == []
    buffer[:] = b"\x00\x00\x00\x00\x00\x00\x00\x00"  # the caller reuses its buffer
    assert decoder.feed(memoryview(b"\xac\n\n")) == [SseEvent(data="€")]


def test_invalid_utf8_is_replaced() -> None:
    """Undecodable bytes become U+FFFD instead of failing the stream."""
    assert decode(b"data: \xff\n\n") == [SseEvent(data="\ufffd")]


def test_sample_stream_decodes_as_expected() -> None:
    """The mixed sample (BOM, comment, CRLF, LF, CR, id, retry, unknown field) decodes."""
    assert decode(SAMPLE) == SAMPLE_EVENTS


def test_split_at_every_byte_position() -> None:
    """Cutting the sample into two chunks anywhere yields the same events."""
    for position in range(len(SAMPLE) + 1):
        assert decode(SAMPLE[:position], SAMPLE[position:]) == SAMPLE_EVENTS, position


def test_one_byte_at_a_time() -> None:
    """Feeding single bytes yields the same events as feeding everything at once."""
    assert decode(*(SAMPLE[i:i + 1] for i in range(len(SAMPLE)))) == SAMPLE_EVENTS


@given(data=st.data(), stream=sse_streams())
def test_any_chunking_yields_the_same_events(data: st.DataObject, stream: bytes) -> None:
    """However the network cuts a stream into chunks, the events are the same."""
    chunks = data.draw(chunkings(stream))
    assert decode(*chunks) == decode(stream)


def test_a_line_longer_than_the_limit_raises_instead_of_growing() -> None:
    decoder = SseDecoder(max_line=1000)
    decoder.feed(b"data: " + b"x" * 900)
    with pytest.raises(SseLimitExceeded) as caught:
        decoder.feed(b"x" * 200)
    assert caught.value.limit == "max_line_bytes"


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
@pytest.mark.parametrize("field", [b"data: ", b"event: ", b"id: ", b": "])
def test_a_whole_line_longer_than_the_limit_in_one_chunk_raises(
        field: bytes, newline: bytes) -> None:
    decoder = SseDecoder(max_line=1000)
    with pytest.raises(SseLimitExceeded) as caught:
        decoder.feed(field + b"x" * 1200 + newline + newline)
    assert caught.value.limit == "max_line_bytes"


def test_an_event_larger_than_the_limit_raises() -> None:
    decoder = SseDecoder(max_line=1000)
    with pytest.raises(SseLimitExceeded) as caught:
        decoder.feed(b"data: " + b"y" * 600 + b"\n" + b"data: " + b"y" * 600 + b"\n")
    assert caught.value.limit == "max_event_bytes"


def test_a_line_in_many_pieces_is_the_same_line() -> None:
    raw = b"data: " + b"z" * 5000 + b"\n\n"
    decoder = SseDecoder()
    events = [e for i in range(0, len(raw), 7) for e in decoder.feed(raw[i:i + 7])]
    assert events == [SseEvent(data="z" * 5000)]


# --- the fast path for whole LF-ended events ------------------------------------------


class LineDecoder(SseDecoder):
    """The line parser alone: whole events are parsed line by line, as before the fast
    path (issue 26); the reference the fast path is held to."""

    def _blocks(self, blocks: list[str], events: list[SseEvent]) -> None:
        self._lines("".join(block + "\n\n" for block in blocks), events)


def decode_with(decoder: SseDecoder, chunks: list[bytes]) -> tuple[list[SseEvent], str | None]:
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    return events + decoder.close(), decoder.last_event_id


@given(data=st.data(), stream=sse_lf_streams())
def test_the_fast_path_decodes_every_chunking_as_the_line_parser(
        data: st.DataObject, stream: bytes) -> None:
    """Any LF stream, cut anywhere: the same events (ids included) and the same last
    event id as the line parser alone, and as the stream fed whole."""
    chunks = data.draw(chunkings(stream))
    fast = decode_with(SseDecoder(), chunks)
    assert fast == decode_with(LineDecoder(), chunks)
    assert fast == decode_with(SseDecoder(), [stream])


@pytest.mark.parametrize("stream", [
    b"data: x\n\n",
    b"data:x\n\n",
    b"data:  x\n\n",
    b"data\n\n",
    b"data:\n\n",
    b"event: e\ndata: x\n\n",
    b"event:e\ndata:x\n\n",
    b"event:\ndata: x\n\n",
    b"event: e\n\n",
    b"event: a:b\ndata: c:d\n\n",
    b"event: \ndata: x\n\n",
    b"event:  e\ndata:  x\n\n",
    b"event: e\ndata: \n\n",
    b"event: e\ndata: x\nid: 3\n\n",
    b"event: e\nid: 1\ndata: x\n\n",
    b"event: e\ndata: x\n: c\n\n",
    b"event: e\ndata: a\ndata: b\n\n",
    b"event: e\ndata:x\n\n",
    b"event: e\nevent: f\ndata: x\n\n",
    b"event: e\ndata: x\ndata: y\n\n",
    b"data: x\nevent: e\n\n",
    b"id: 7\ndata: x\n\ndata: y\n\n",
    b"retry: 10\ndata: x\n\n",
    b": ping\n\nevent: e\ndata: x\n\n",
    b"data: x\n\n\n\ndata: y\n\n\n",
    b"\n\n\ndata: x\n\n",
    b"eventx: e\ndata: x\n\n",
    b"event: e\ndatax: x\n\n",
    b"\xef\xbb\xbfevent: e\ndata: x\n\n",
    b"event: e\ndata: x\n\nevent: f\ndata: y",
])
def test_the_fast_path_agrees_with_the_line_parser_on_odd_blocks(stream: bytes) -> None:
    """Each block shape at the fast path's edges, fed whole, cut once at every
    position, and byte by byte."""
    cut_once = [[stream[:i], stream[i:]] for i in range(1, len(stream))]
    for chunks in ([stream], *cut_once, [stream[i:i + 1] for i in range(len(stream))]):
        assert decode_with(SseDecoder(), chunks) == decode_with(LineDecoder(), chunks)


def test_a_provider_stream_takes_no_line_by_line_parsing() -> None:
    """Whole ``event:`` + ``data:`` events, as providers send them, are decoded without
    a per-line step (issue 26: a cursor turn's 14 frames took 42 ``_line`` calls)."""
    lines: list[str] = []

    class Counting(SseDecoder):
        def _line(self, line: str, events: list[SseEvent]) -> None:
            lines.append(line)
            super()._line(line, events)

    stream = b"".join(b"event: response.output_text.delta\ndata: {\"delta\":\"%d\"}\n\n" % i
                      for i in range(14))
    events = Counting().feed(stream)
    assert [event.data for event in events] == [f'{{"delta":"{i}"}}' for i in range(14)]
    assert lines == []


def test_a_provider_chunk_takes_no_argument_parsing_string_method_and_no_codec_frame(
        ) -> None:
    """The fast path cuts a block with ``partition`` (one argument, no tuple parsed):
    ``str.startswith`` and ``str.find`` parse their arguments as a tuple each call, and
    the fast path made six such calls a block; and a chunk's bytes are decoded by the C
    UTF-8 decoder directly, not through ``codecs``' incremental decoder's Python method
    (issue 26, fifth pass)."""
    stream = b"".join(b"event: response.output_text.delta\ndata: {\"delta\":\"%d\"}\n\n" % i
                      for i in range(14)) + b"data: [DONE]\n\n"
    decoder = SseDecoder()
    decoder.feed(b"data: warm\n\n")
    calls: list[str] = []

    def profile(frame: types.FrameType, event: str, arg: object) -> None:
        if event == "c_call":
            calls.append(getattr(arg, "__name__", ""))
        elif event == "call":
            calls.append(frame.f_code.co_filename)

    sys.setprofile(profile)
    try:
        events = decoder.feed(stream)
    finally:
        sys.setprofile(None)
    assert len(events) == 15
    assert [name for name in calls if name in {"startswith", "find"}] == []
    assert [name for name in calls if name.endswith("codecs.py")] == []


def test_the_fast_path_holds_a_block_to_the_line_limit() -> None:
    """A whole event longer than the limit raises as the line parser does."""
    with pytest.raises(SseLimitExceeded) as caught:
        SseDecoder(max_line=100).feed(b"data: " + b"x" * 200 + b"\n\n")
    assert caught.value.limit == "max_line_bytes"
    assert SseDecoder(max_line=100).feed(b"data: " + b"x" * 90 + b"\n\n")[0].data == "x" * 90


def test_the_fast_constructors_build_the_attrs_values() -> None:
    """``sse_event``, ``text_delta`` and ``reasoning_delta`` make the very values the
    attrs classes' own constructors make (equal, same hash and repr, still frozen)."""
    made = [(sse_event("d", "e", "7"), SseEvent(data="d", event="e", id="7")),
            (sse_event("d", "message", None), SseEvent(data="d")),
            (text_delta("t"), TextDelta(text="t")),
            (reasoning_delta("r"), ReasoningDelta(text="r"))]
    for fast, slow in made:
        assert type(fast) is type(slow)
        assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            fast.text = "x"  # type: ignore[misc,union-attr]
