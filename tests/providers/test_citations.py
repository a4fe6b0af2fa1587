"""Citations survive the wire (wire6): every parser, streamed and whole, keeps the
sources an answer cites on its text part; a malformed one is dropped, the text kept.
Plus two small wire gaps: a Chat Completions body with a tool call and no
``finish_reason``, and a cancelled Gemini interaction."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.providers.support import parse_stream
from turnstate.core._citations import Citation, cited_urls, is_link
from turnstate.core._conversation import TextPart
from turnstate.core._errors import FatalProviderError, ProviderProtocolError
from turnstate.providers._protocol import SseEvent, sse_event
from turnstate.providers.anthropic._stream import AnthropicStreamParser
from turnstate.providers.anthropic._stream import parse_response_body as anthropic_body
from turnstate.providers.chat_completions import ChatCompletionsStreamParser
from turnstate.providers.chat_completions import parse_response_body as chat_body
from turnstate.providers.gemini_interactions import parse_response_body as gemini_body
from turnstate.providers.gemini_interactions._parser import InteractionsStreamParser
from turnstate.providers.openai_responses._assemble import parse_response_body as responses_body
from turnstate.providers.openai_responses._parser import ResponsesStreamParser

URL = {"type": "url_citation", "url": "https://example.com/a", "title": "A",
       "start_index": 0, "end_index": 5}
FILE = {"type": "file_citation", "file_id": "file_1", "filename": "notes.pdf", "index": 3}
BAD: list[Any] = [7, "x", None, {"no": "type"}, {"type": 5},
                  {"type": "url_citation", "url": 5, "start_index": "0", "end_index": -1}]
"""What must never fail a turn: each is skipped, or read as far as it is typed."""


def frames(*pairs: tuple[str, Any]) -> list[SseEvent]:
    return [sse_event(data if isinstance(data, str) else json.dumps(data), name, None)
            for name, data in pairs]


def text_part(parts: tuple[Any, ...]) -> TextPart:
    (text,) = [p for p in parts if isinstance(p, TextPart)]
    return text


# --- OpenAI Responses ------------------------------------------------------------------

def _message(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "id": "msg_1", "role": "assistant", "content": list(blocks)}


def test_responses_body_keeps_annotations_and_moves_a_later_blocks_spans() -> None:
    body = {"id": "resp_1", "status": "completed", "model": "gpt-5", "output": [_message(
        {"type": "output_text", "text": "Hello", "annotations": [URL, *BAD]},
        {"type": "output_text", "text": " world", "annotations": [URL, FILE]})]}
    text = text_part(responses_body(body).parts)
    assert text.text == "Hello world"
    url = Citation(kind="url_citation", url="https://example.com/a", title="A", start=0, end=5)
    assert text.citations == (
        url, Citation(kind="url_citation"),
        Citation(kind="url_citation", url="https://example.com/a", title="A", start=5, end=10),
        Citation(kind="file_citation", title="notes.pdf", start=8, source_id="file_1"))


def _responses_stream(*middle: tuple[str, Any], done_item: dict[str, Any] | None
                      ) -> list[SseEvent]:
    head = {"id": "resp_1", "status": "in_progress", "model": "gpt-5", "output": []}
    tail: list[tuple[str, Any]] = []
    if done_item is not None:
        tail.append(("response.output_item.done", {
            "type": "response.output_item.done", "output_index": 0, "item": done_item}))
    final = {**head, "status": "completed", "output": [done_item] if done_item else []}
    return frames(
        ("response.created", {"type": "response.created", "response": head}),
        ("response.output_item.added", {"type": "response.output_item.added",
                                        "output_index": 0, "item": _message()}),
        ("response.output_text.delta", {"type": "response.output_text.delta",
                                        "output_index": 0, "content_index": 0,
                                        "delta": "Hello"}),
        *middle, *tail,
        ("response.completed", {"type": "response.completed", "response": final}))


def _annotation_added(annotation: Any) -> tuple[str, Any]:
    return ("response.output_text.annotation.added", {
        "type": "response.output_text.annotation.added", "output_index": 0,
        "content_index": 0, "annotation_index": 0, "annotation": annotation})


def test_responses_stream_takes_the_finished_items_annotations() -> None:
    item = _message({"type": "output_text", "text": "Hello", "annotations": [URL]})
    response, deltas = parse_stream(ResponsesStreamParser(), _responses_stream(
        _annotation_added(URL), done_item=item))
    assert [d.text for d in deltas] == ["Hello"]
    assert text_part(response.parts).citations == (Citation(
        kind="url_citation", url="https://example.com/a", title="A", start=0, end=5),)


def test_responses_stream_keeps_streamed_annotations_of_an_item_never_finished() -> None:
    """No ``output_item.done`` and an empty terminal ``output``: the item is assembled
    from its deltas, its ``annotation.added`` frames (a bad one skipped) with it."""
    response, _ = parse_stream(ResponsesStreamParser(), _responses_stream(
        _annotation_added(URL), _annotation_added("junk"), done_item=None))
    text = text_part(response.parts)
    assert text.text == "Hello"
    assert [c.url for c in text.citations] == ["https://example.com/a"]


# --- Chat Completions ------------------------------------------------------------------

CHAT_URL = {"type": "url_citation", "url_citation": {
    "url": "https://example.com/c", "title": "C", "start_index": 1, "end_index": 4}}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[str, Any]:
    return ("message", {"object": "chat.completion.chunk", "id": "c1", "model": "gpt-4o",
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def test_chat_stream_keeps_delta_annotations() -> None:
    response, deltas = parse_stream(ChatCompletionsStreamParser("openai-compatible"), frames(
        _chunk({"role": "assistant", "content": "Hi there"}),
        _chunk({"annotations": [CHAT_URL, *BAD]}), _chunk({}, "stop"),
        ("message", "[DONE]")))
    assert [d.text for d in deltas] == ["Hi there"]
    assert text_part(response.parts).citations == (
        Citation(kind="url_citation", url="https://example.com/c", title="C", start=1, end=4),
        Citation(kind="url_citation"))


def test_chat_body_keeps_message_annotations_and_text_when_they_are_junk() -> None:
    def body(annotations: Any) -> dict[str, Any]:
        return {"id": "c1", "model": "gpt-4o", "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "Hi", "annotations": annotations}}]}
    assert text_part(chat_body(body([CHAT_URL])).parts).citations[0].url == \
        "https://example.com/c"
    for junk in ("x", {"a": 1}, 5, [None]):
        assert chat_body(body(junk)).parts == (TextPart(text="Hi"),)


def test_chat_body_with_a_tool_call_and_no_finish_reason_fails() -> None:
    """3.3 lists the finish reasons and null is none of them. As the streamed case
    (a call the server never said it finished may be cut, and never runs): a
    ``protocol_error`` with code ``no_finish_reason``. It completed, finish None, and
    the call ran. Text alone completes with finish None, as a stream closed by [DONE]."""
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Os"}}
    with pytest.raises(ProviderProtocolError) as caught:
        chat_body({"id": "c1", "model": "gpt-4o", "choices": [{"index": 0, "finish_reason": None,
                   "message": {"role": "assistant", "content": None, "tool_calls": [call]}}]})
    assert caught.value.code == "no_finish_reason"
    text = chat_body({"id": "c1", "model": "gpt-4o", "choices": [
        {"index": 0, "finish_reason": None, "message": {"role": "assistant", "content": "Hi"}}]})
    assert (text.parts, text.finish_reason) == ((TextPart(text="Hi"),), None)


# --- Anthropic -------------------------------------------------------------------------

CHAR = {"type": "char_location", "cited_text": "The sky is blue.", "document_index": 0,
        "document_title": "Facts", "start_char_index": 0, "end_char_index": 16}
WEB = {"type": "web_search_result_location", "cited_text": "Oslo is cold",
       "url": "https://example.com/oslo", "title": "Oslo", "encrypted_index": "Eo8..."}
PAGE = {"type": "page_location", "cited_text": "p", "document_index": 1,
        "start_page_number": 2, "end_page_number": 3}
SEARCH = {"type": "search_result_location", "cited_text": "s", "source": "https://example.com/s",
          "title": "S", "search_result_index": 0, "start_block_index": 0, "end_block_index": 1}
ANTHROPIC_CITED = (
    Citation(kind="char_location", title="Facts", cited_text="The sky is blue.", source_id="0",
             source_start=0, source_end=16),
    Citation(kind="web_search_result_location", url="https://example.com/oslo", title="Oslo",
             cited_text="Oslo is cold"),
    Citation(kind="page_location", cited_text="p", source_id="1", source_start=2, source_end=3),
    Citation(kind="search_result_location", url="https://example.com/s", title="S",
             cited_text="s", source_start=0, source_end=1),
    Citation(kind="url_citation"))


def test_anthropic_body_keeps_each_text_blocks_citations() -> None:
    body = {"type": "message", "id": "msg_1", "model": "claude-sonnet-4-5", "role": "assistant",
            "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1},
            "content": [{"type": "text", "text": "The sky is blue.",
                         "citations": [CHAR, WEB, PAGE, SEARCH, *BAD]}]}
    assert text_part(anthropic_body(body).parts).citations == ANTHROPIC_CITED


def test_anthropic_stream_keeps_citations_deltas() -> None:
    def delta(body: dict[str, Any]) -> tuple[str, Any]:
        return ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                        "delta": body})
    citations = [delta({"type": "citations_delta", "citation": c})
                 for c in (CHAR, WEB, PAGE, SEARCH, *BAD)]
    response, deltas = parse_stream(AnthropicStreamParser(), frames(
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_1", "model": "claude-sonnet-4-5", "content": [],
            "usage": {"input_tokens": 1, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": "",
                                                   "citations": []}}),
        *citations[:2], delta({"type": "text_delta", "text": "The sky is blue."}),
        *citations[2:],
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"})))
    assert [d.text for d in deltas] == ["The sky is blue."]
    assert text_part(response.parts).citations == ANTHROPIC_CITED


# --- Gemini Interactions ---------------------------------------------------------------

GEMINI = {"url": "https://example.com/g", "start_index": 0, "end_index": 3}
GEMINI_SOURCE = {"source": "doc-7", "start_index": 0, "end_index": 2}


def test_gemini_body_keeps_text_annotations_in_bytes() -> None:
    body = {"id": "v1_1", "status": "completed", "model": "gemini-2.5-flash", "steps": [
        {"type": "model_output", "content": [
            {"type": "text", "text": "Blå", "annotations": [GEMINI]},
            {"type": "text", "text": "!!", "annotations": [GEMINI_SOURCE, *BAD]}]}]}
    text = text_part(gemini_body(body).parts)
    assert text.text == "Blå!!"
    assert text.citations == (  # "Blå" is 4 bytes: the second block's span starts there
        Citation(kind="url_citation", url="https://example.com/g", start=0, end=3),
        Citation(kind="url_citation", start=4, end=6, source_id="doc-7"))


def _gemini(status: str, *middle: tuple[str, Any]) -> list[SseEvent]:
    return frames(
        ("interaction.created", {"interaction": {"id": "v1_1", "status": "in_progress"},
                                 "event_type": "interaction.created"}),
        ("step.start", {"index": 0, "step": {"type": "model_output"},
                        "event_type": "step.start"}),
        ("step.delta", {"index": 0, "delta": {"type": "text", "text": "Oslo"},
                        "event_type": "step.delta"}),
        *middle,
        ("step.stop", {"index": 0, "event_type": "step.stop"}),
        ("interaction.completed", {"interaction": {"id": "v1_1", "status": status},
                                   "event_type": "interaction.completed"}),
        ("done", "[DONE]"))


def test_gemini_stream_keeps_text_annotation_deltas() -> None:
    def annotations(value: Any) -> tuple[str, Any]:
        return ("step.delta", {"index": 0, "event_type": "step.delta", "delta": {
            "type": "text_annotation_delta", "annotations": value}})
    response, deltas = parse_stream(InteractionsStreamParser(), _gemini(
        "completed", annotations([GEMINI]), annotations("junk"), annotations([7])))
    assert [d.text for d in deltas] == ["Oslo"]
    assert text_part(response.parts).citations == (
        Citation(kind="url_citation", url="https://example.com/g", start=0, end=3),)


def test_gemini_a_step_that_starts_whole_keeps_its_annotations() -> None:
    """A ``model_output`` step complete in its ``step.start`` (its text streamed at once):
    its content's annotations stand, spans as the blocks give them."""
    step = {"type": "model_output", "content": [
        {"type": "text", "text": "Blå", "annotations": [GEMINI]},
        {"type": "text", "text": "!!", "annotations": [GEMINI_SOURCE]}]}
    response, deltas = parse_stream(InteractionsStreamParser(), frames(
        ("interaction.created", {"interaction": {"id": "v1_1"},
                                 "event_type": "interaction.created"}),
        ("step.start", {"index": 0, "step": step, "event_type": "step.start"}),
        ("step.stop", {"index": 0, "event_type": "step.stop"}),
        ("interaction.completed", {"interaction": {"id": "v1_1", "status": "completed"},
                                   "event_type": "interaction.completed"})))
    assert [d.text for d in deltas] == ["Blå!!"]
    assert text_part(response.parts).citations == (
        Citation(kind="url_citation", url="https://example.com/g", start=0, end=3),
        Citation(kind="url_citation", start=4, end=6, source_id="doc-7"))


def test_gemini_a_cancelled_interaction_is_no_answer() -> None:
    """2.3 ``cancelled``: it was the finish ``cancelled`` (the turn's ``other``) and the
    fragment was committed as the answer; a cancelled turn is an abort."""
    with pytest.raises(FatalProviderError) as caught:
        parse_stream(InteractionsStreamParser(), _gemini("cancelled"))
    assert caught.value.code == "cancelled"
    with pytest.raises(FatalProviderError):
        gemini_body({"id": "v1_1", "status": "cancelled", "steps": []})


# --- the record ------------------------------------------------------------------------

def test_only_http_urls_are_links_each_once() -> None:
    cited = [Citation(kind="k", url="https://a.example/x", title=None),
             Citation(kind="k", url="javascript:alert(1)", title="evil"),
             Citation(kind="k", url="HTTP://b.example", title="B"),
             Citation(kind="k", url="https://a.example/x", title="A"),
             Citation(kind="k", url="https://", title="empty"),
             Citation(kind="k", url=None, title="no url")]
    assert cited_urls(cited) == [("https://a.example/x", "A"), ("HTTP://b.example", "B")]
    assert not is_link("data:text/html,hi") and not is_link(None)
