"""Wire fidelity from the bytes up (helper "wire"): every stream in tests/data and in the
recorded fixtures, framed as the provider frames it (``event:`` lines where it names its
frames, LF or CRLF line ends, ``: keep-alive`` comments between frames, the provider's
end marker), read through the SSE decoder and the codec's parser whole and one byte at a
time: the same events, the same response or the same typed error. Then what the data
files written from providers-wire.md show: stop reasons, unknown events and items,
several choices, gapped tool-call indexes, and the legacy Gemini format.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATA_DIR, RECORDED_DIR
from tests.providers.test_restarts import PlayedTransport, run
from turnstate.core._citations import Citation
from turnstate.core._conversation import OpaquePart, ReasoningPart, TextPart, ToolCallPart
from turnstate.core._errors import (
    FatalProviderError,
    ProviderError,
    ProviderProtocolError,
    TransientProviderError,
)
from turnstate.providers._protocol import ProviderResponse, SseEvent, StreamParser
from turnstate.providers._sse import SseDecoder
from turnstate.providers.anthropic import AnthropicAdapter
from turnstate.providers.chat_completions import ChatCompletionsAdapter
from turnstate.providers.chat_completions import parse_response_body as chat_body
from turnstate.providers.deepseek import DeepSeekAdapter
from turnstate.providers.deepseek import parse_response_body as deepseek_body
from turnstate.providers.gemini_interactions import (
    GeminiInteractionsAdapter,
    InteractionsStreamParser,
    parse_response_body,
)
from turnstate.providers.openai_responses import OpenAIResponsesAdapter


class Wire:
    """How one folder's streams go on the wire: the parser, the field that names a
    frame (None: unnamed frames) and what ends the stream after the last frame."""

    def __init__(self, parser: Callable[[], StreamParser], key: str | None, end: str) -> None:
        self.parser, self.key, self.end = parser, key, end


WIRES = {
    "anthropic": Wire(lambda: AnthropicAdapter(api_key="k").stream_parser(), "type", ""),
    "openai-responses": Wire(lambda: OpenAIResponsesAdapter(api_key="k").stream_parser(),
                             "type", ""),
    "gemini-interactions": Wire(
        lambda: GeminiInteractionsAdapter(api_key="k").stream_parser(), "event_type",
        "event: done\ndata: [DONE]\n\n"),
    "chat-completions": Wire(lambda: ChatCompletionsAdapter(api_key="k").stream_parser(),
                             None, "data: [DONE]\n\n"),
    "deepseek": Wire(lambda: DeepSeekAdapter(api_key="k").stream_parser(), None,
                     "data: [DONE]\n\n"),
}


def wire_bytes(path: Path, wire: Wire, *, crlf: bool, keep_alive: bool) -> bytes:
    """A ``*.chunks.txt`` file as the provider sends it (a ``*.sse`` file is already)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".sse":
        frames = []
        for line in filter(str.strip, text.splitlines()):
            name = json.loads(line).get(wire.key) if wire.key else None
            head = f"event: {name}\n" if isinstance(name, str) else ""
            frames.append(f"{head}data: {line}\n\n")
        text = (": keep-alive\n\n" if keep_alive else "").join(frames) + wire.end
    return text.replace("\n", "\r\n").encode() if crlf else text.encode()


Outcome = tuple[str, Any, Any]


def read(wire: Wire, raw: bytes, size: int | None) -> Outcome:
    """``raw`` through a decoder and a parser in pieces of ``size`` bytes (None: whole):
    ``("ok", events, response)`` or ``("error", type, message)``."""
    parser, decoder, events = wire.parser(), SseDecoder(), []
    pieces = [raw] if size is None else [raw[i:i + size] for i in range(0, len(raw), size)]
    try:
        for piece in pieces:
            for event in decoder.feed(piece):
                if not parser.done:
                    events.extend(parser.feed(event))
        response: ProviderResponse = parser.finish()
    except ProviderError as exc:
        return "error", type(exc), str(exc)
    return "ok", events, response


def streams() -> Iterator[Any]:
    for root in (DATA_DIR, RECORDED_DIR):
        for folder, wire in WIRES.items():
            for path in sorted((root / folder).glob("*")) if (root / folder).is_dir() else ():
                if path.name.endswith((".chunks.txt", ".sse")):
                    yield pytest.param(path, wire, id=f"{root.name}/{folder}/{path.name}")


@pytest.mark.parametrize(("path", "wire"), list(streams()))
def test_every_stream_reads_the_same_in_any_cut(path: Path, wire: Wire) -> None:
    whole = read(wire, wire_bytes(path, wire, crlf=False, keep_alive=False), None)
    for crlf in (False, True):
        raw = wire_bytes(path, wire, crlf=crlf, keep_alive=True)
        assert read(wire, raw, None) == whole
        assert read(wire, raw, 1) == whole  # every frame split at every byte
    if whole[0] == "error":  # a stream that fails, fails typed and says why
        assert issubclass(whole[1], ProviderError) and whole[2]


def data(folder: str, name: str, *, crlf: bool = False) -> Outcome:
    wire = WIRES[folder]
    return read(wire, wire_bytes(DATA_DIR / folder / name, wire, crlf=crlf,
                                 keep_alive=False), None)


def ok(outcome: Outcome) -> tuple[list[Any], ProviderResponse]:
    assert outcome[0] == "ok", outcome
    return outcome[1], outcome[2]


# --- what the data files show ---------------------------------------------------------


def test_anthropic_pause_turn_is_a_typed_end() -> None:
    """5.3 ``pause_turn`` (a paused server-tool turn; wiresmall): no answer to commit."""
    outcome = data("anthropic", "pause-turn-server-tool.chunks.txt")
    assert outcome[:2] == ("error", FatalProviderError) and "pause_turn" in outcome[2]


@pytest.mark.parametrize(("name", "finish", "raw", "text"), [
    ("refusal.chunks.txt", "refusal", "refusal", "I can't help with that"),
    ("context-window-exceeded.chunks.txt", "length", "model_context_window_exceeded",
     "The summary so far"),
])
def test_anthropic_stop_reasons(name: str, finish: str, raw: str, text: str) -> None:
    _, response = ok(data("anthropic", name))
    assert response.parts == (TextPart(text=text),)
    assert (response.finish_reason, response.raw_finish_reason) == (finish, raw)


def test_anthropic_unknown_events_deltas_and_blocks_are_ignored_or_kept() -> None:
    events, response = ok(data("anthropic", "unknown-events.chunks.txt"))
    assert [e.text for e in events] == ["Still here."]
    text, block = response.parts
    # the citations_delta (wire6): kept on the text it cites
    assert text == TextPart(text="Still here.", citations=(Citation(
        kind="char_location", cited_text="x", source_id="0", source_start=0, source_end=1),))
    assert isinstance(block, OpaquePart) and block.kind == "future_block"
    assert response.finish_reason == "stop"


def test_responses_incomplete_for_content_filter() -> None:
    _, response = ok(data("openai-responses", "incomplete-content-filter.chunks.txt"))
    assert response.parts == (TextPart(text="Partly "),)
    assert (response.finish_reason, response.raw_finish_reason) == (
        "content_filter", "content_filter")


def test_responses_unknown_events_and_items() -> None:
    events, response = ok(data("openai-responses", "unknown-item.chunks.txt"))
    assert [e.text for e in events] == ["Done."]
    block, text = response.parts
    assert isinstance(block, OpaquePart) and block.kind == "future_tool_call"
    assert json.loads(block.raw)["detail"] == {"k": "v"}
    assert text == TextPart(text="Done.")
    assert response.response_id == "resp_data_unk01"


def test_chat_keeps_choice_zero_and_calls_across_an_index_gap() -> None:
    events, response = ok(data("chat-completions", "multi-choice-gapped-calls.chunks.txt"))
    assert events == []  # choice 1's text is not this answer's
    assert response.parts == (
        ToolCallPart(call_id="call_data_a", name="weather", arguments='{"city":"Oslo"}',
                     provider="openai-compatible", model="gpt-4o-mini"),
        ToolCallPart(call_id="call_data_b", name="time", arguments='{"tz":"CET"}',
                     provider="openai-compatible", model="gpt-4o-mini"))
    assert response.finish_reason == "tool_calls"
    assert response.usage.input_tokens == 50


@pytest.mark.parametrize("crlf", [False, True])
def test_deepseek_keep_alive_comments_before_and_between_chunks(crlf: bool) -> None:
    events, response = ok(data("deepseek", "reasoning-keepalive.sse", crlf=crlf))
    assert [e.text for e in events] == ["Two plus two \u2248 vier \U0001f600.", "4 \u2713"]
    reasoning, text = response.parts  # raw UTF-8 on the wire: cut inside characters too
    assert isinstance(reasoning, ReasoningPart)
    assert reasoning.text == "Two plus two \u2248 vier \U0001f600."
    assert text == TextPart(text="4 \u2713")
    assert response.usage.reasoning_tokens == 4


# --- the legacy Gemini Interactions format (before May 2026) --------------------------


def test_a_legacy_gemini_stream_fails_at_its_first_frame_naming_the_format() -> None:
    """Read as unknown events, the legacy stream showed nothing and failed only at its
    end as "ended before interaction.completed", its text dropped unsaid."""
    path = DATA_DIR / "gemini-interactions" / "legacy-text.chunks.txt"
    first = path.read_text(encoding="utf-8").splitlines()[0]
    parser = InteractionsStreamParser()
    decoder = SseDecoder()
    (event,) = decoder.feed(f"event: interaction.start\ndata: {first}\n\n".encode())
    with pytest.raises(ProviderProtocolError, match="legacy Interactions format"):
        parser.feed(event)
    outcome = data("gemini-interactions", "legacy-text.chunks.txt")
    assert outcome[:2] == ("error", ProviderProtocolError)
    assert "'interaction.start'" in outcome[2]


def test_a_legacy_gemini_body_is_refused_not_read_as_an_empty_answer() -> None:
    """A body with ``outputs`` and no ``steps`` was a completed answer with no parts."""
    body = json.loads((DATA_DIR / "gemini-interactions" / "legacy-function-call.json")
                      .read_text(encoding="utf-8"))
    with pytest.raises(ProviderProtocolError, match="legacy Interactions format"):
        parse_response_body(body)


# --- stop and finish reasons the providers document that broke the turn ---------------


def test_deepseek_insufficient_system_resource_is_a_retryable_interruption() -> None:
    """DeepSeek's documented ``insufficient_system_resource`` completed the turn with
    the fragment before it as the answer (finish ``other``)."""
    outcome = data("deepseek", "insufficient-resource.chunks.txt")
    assert outcome[:2] == ("error", TransientProviderError)
    assert "insufficient_system_resource" in outcome[2]
    body = {"id": "ds-1", "object": "chat.completion", "model": "deepseek-v4-flash",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Half"},
                         "finish_reason": "insufficient_system_resource"}]}
    with pytest.raises(TransientProviderError) as caught:
        deepseek_body(body)
    assert caught.value.code == "insufficient_system_resource" and caught.value.retryable


def test_anthropic_refusal_inside_a_tool_use_keeps_the_text_and_drops_the_cut_call() -> None:
    """A refusal that stops a ``tool_use`` mid-input failed the turn as a malformed
    stream (the input is not JSON), losing the text the model had said."""
    events, response = ok(data("anthropic", "refusal-mid-tool-use.chunks.txt"))
    assert [e.text for e in events] == ["Let me look that up."]
    assert response.parts == (TextPart(text="Let me look that up."),)
    assert (response.finish_reason, response.raw_finish_reason) == ("refusal", "refusal")
    assert response.metadata["droppedToolCalls"] == [
        {"id": "toolu_data_refuse02", "name": "lookup", "reason": "refusal"}]


def test_a_refusal_after_a_whole_tool_use_keeps_the_call() -> None:
    path = DATA_DIR / "anthropic" / "refusal-mid-tool-use.chunks.txt"
    text = path.read_text(encoding="utf-8").replace(
        '"how to"}}', '"how to\\"}"}}')
    wire = WIRES["anthropic"]
    raw = "".join(f"event: {json.loads(line)['type']}\ndata: {line}\n\n"
                  for line in text.splitlines() if line.strip()).encode()
    _, response = ok(read(wire, raw, None))
    assert response.tool_calls == (ToolCallPart(
        call_id="toolu_data_refuse02", name="lookup", arguments='{"query": "how to"}',
        provider="anthropic", model="claude-sonnet-4-5"),)
    assert "droppedToolCalls" not in response.metadata


def test_chat_legacy_function_call_deltas_are_the_call() -> None:
    """``function_call`` deltas (finish ``function_call``) were dropped: the answer
    ended on "tool_calls" with no call."""
    _, response = ok(data("chat-completions", "legacy-function-call.chunks.txt"))
    (call,) = response.tool_calls
    assert (call.name, call.arguments) == ("weather", '{"city":"Oslo"}')
    assert call.call_id.startswith("call_ts0_")
    assert response.finish_reason == "tool_calls"
    body = {"id": "c-1", "object": "chat.completion", "model": "m", "choices": [{
        "index": 0, "finish_reason": "function_call", "message": {
            "role": "assistant", "content": None,
            "function_call": {"name": "weather", "arguments": '{"city":"Oslo"}'}}}]}
    (call,) = chat_body(body).tool_calls
    assert (call.name, call.arguments) == ("weather", '{"city":"Oslo"}')


def test_a_function_call_mirroring_tool_calls_is_not_a_second_call() -> None:
    chunk = {"id": "c-2", "object": "chat.completion.chunk", "model": "m", "usage": None}
    fragment = {"name": "weather", "arguments": '{"city":"Oslo"}'}
    frames = [
        {**chunk, "choices": [{"index": 0, "finish_reason": None, "delta": {"tool_calls": [
            {"index": 0, "id": "call_m", "type": "function", "function": fragment}]}}]},
        {**chunk, "choices": [{"index": 0, "finish_reason": None,
                               "delta": {"function_call": fragment}}]},
        {**chunk, "choices": [{"index": 0, "finish_reason": "tool_calls", "delta": {}}]},
    ]
    raw = "".join(f"data: {json.dumps(f)}\n\n" for f in frames) + "data: [DONE]\n\n"
    _, response = ok(read(WIRES["chat-completions"], raw.encode(), None))
    assert [c.call_id for c in response.tool_calls] == ["call_m"]


async def test_an_interruption_before_any_output_is_sent_again() -> None:
    """``insufficient_system_resource`` on a first chunk that showed nothing: the call
    is restarted and the second answer is the response (before: a completed empty
    answer, finish ``other``)."""
    def chunk(delta: dict[str, Any], finish: str | None, usage: Any = None) -> SseEvent:
        return SseEvent(data=json.dumps({
            "id": "ds-r", "object": "chat.completion.chunk", "model": "deepseek-v4-flash",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            "usage": usage}))

    usage = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
    cut = [chunk({"role": "assistant", "content": "", "reasoning_content": ""}, None),
           chunk({"content": ""}, "insufficient_system_resource", usage)]
    answer = [chunk({"role": "assistant", "content": "4"}, None), chunk({}, "stop", usage),
              SseEvent(data="[DONE]")]
    transport = PlayedTransport(cut, answer)
    items = await run(DeepSeekAdapter(api_key="k"), transport)
    assert transport.restarts == [1]
    assert [i.text for i in items[:-1]] == ["4"]
    assert items[-1].parts == (TextPart(text="4"),)
