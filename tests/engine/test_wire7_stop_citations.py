"""A stopped answer keeps the citations of the text the user saw (wire7). A stop cuts the
call mid-answer and the turn stores the streamed text; the sources the stream had
already cited on it (an Anthropic ``citations_delta``, a Responses
``output_text.annotation.added``, Chat Completions delta ``annotations``, a Gemini
``text_annotation_delta``) were dropped with the parser. The streams are hand-written
from providers-wire.md; the transport plays one and then waits until the stop cuts it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from turnstate import MemoryStore, TextPart, TurnEngine, TurnInput
from turnstate.core._citations import Citation
from turnstate.core._errors import ProviderError
from turnstate.providers._protocol import ErrorClassifier, HttpRequest, SseEvent
from turnstate.providers.anthropic import AnthropicAdapter
from turnstate.providers.chat_completions import ChatCompletionsAdapter
from turnstate.providers.gemini_interactions import GeminiInteractionsAdapter
from turnstate.providers.openai_responses import OpenAIResponsesAdapter

URL = "https://example.com/oslo"


def _named(kind: str, key: str = "type", **fields: Any) -> SseEvent:
    return SseEvent(event=kind, data=json.dumps({key: kind, **fields}))


def _chunk(delta: dict[str, Any]) -> SseEvent:
    return SseEvent(data=json.dumps({"id": "c1", "object": "chat.completion.chunk",
                                     "model": "gpt-4o", "choices": [
                                         {"index": 0, "delta": delta, "finish_reason": None}]}))


ANTHROPIC = [
    _named("message_start", message={
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [], "stop_reason": None, "usage": {"input_tokens": 5, "output_tokens": 1}}),
    _named("content_block_start", index=0, content_block={"type": "text", "text": "",
                                                          "citations": []}),
    _named("content_block_delta", index=0, delta={"type": "citations_delta", "citation": {
        "type": "web_search_result_location", "url": URL, "title": "Oslo",
        "cited_text": "Oslo is the capital", "encrypted_index": "x"}}),
    _named("content_block_delta", index=0, delta={"type": "text_delta", "text": "Oslo is"}),
    _named("content_block_delta", index=0, delta={"type": "text_delta", "text": " big."}),
]
RESPONSES = [
    _named("response.created", response={"id": "resp_1", "status": "in_progress"}),
    _named("response.output_item.added", output_index=0, item={
        "id": "msg_1", "type": "message", "role": "assistant", "content": []}),
    _named("response.output_text.delta", item_id="msg_1", output_index=0, content_index=0,
           delta="Oslo is"),
    _named("response.output_text.annotation.added", item_id="msg_1", output_index=0,
           content_index=0, annotation_index=0, annotation={
               "type": "url_citation", "url": URL, "title": "Oslo", "start_index": 0,
               "end_index": 4}),
    _named("response.output_text.delta", item_id="msg_1", output_index=0, content_index=0,
           delta=" big."),
]
CHAT = [
    _chunk({"role": "assistant", "content": "Oslo is"}),
    _chunk({"content": " big.", "annotations": [{"type": "url_citation", "url_citation": {
        "url": URL, "title": "Oslo", "start_index": 0, "end_index": 4}}]}),
]
GEMINI = [
    _named("interaction.created", "event_type", interaction={"id": "v1_1",
                                                             "status": "in_progress"}),
    _named("step.start", "event_type", index=0, step={"type": "model_output"}),
    _named("step.delta", "event_type", index=0, delta={"type": "text", "text": "Oslo is"}),
    _named("step.delta", "event_type", index=0, delta={
        "type": "text_annotation_delta", "annotations": [
            {"type": "url_citation", "url": URL, "title": "Oslo", "start_index": 0,
             "end_index": 4}]}),
    _named("step.delta", "event_type", index=0, delta={"type": "text", "text": " big."}),
]
SPAN = Citation(kind="url_citation", url=URL, title="Oslo", start=0, end=4)
CASES = {
    "anthropic": ("claude-sonnet-4-5", AnthropicAdapter(api_key="k"), ANTHROPIC, Citation(
        kind="web_search_result_location", url=URL, title="Oslo",
        cited_text="Oslo is the capital")),
    "openai": ("gpt-4o", OpenAIResponsesAdapter(api_key="k"), RESPONSES, SPAN),
    "openai-compatible": ("gpt-4o", ChatCompletionsAdapter(api_key="k"), CHAT, SPAN),
    "gemini": ("gemini-2.5-flash", GeminiInteractionsAdapter(api_key="k"), GEMINI, SPAN),
}


class HangingTransport:
    """Plays its events, then waits (for the stop to cut the call)."""

    def __init__(self, events: list[SseEvent]) -> None:
        self.events = events

    async def stream(self, request: HttpRequest,
                     classify: ErrorClassifier) -> AsyncGenerator[SseEvent, None]:
        for event in self.events:
            yield event
        await asyncio.Event().wait()

    async def before_restart(self, restarts: int, error: ProviderError) -> bool:
        return False


@pytest.mark.parametrize("provider", sorted(CASES))
async def test_a_stopped_answer_keeps_the_citations_streamed_before_the_stop(
        provider: str) -> None:
    model, adapter, events, citation = CASES[provider]
    engine = TurnEngine(MemoryStore(), {provider: adapter}, HangingTransport(events))
    chat = await engine.store.create_chat(owner="o")
    turn = TurnInput(provider=provider, model=model, system_prompt="s", turn_id="t1",
                     user_text="Tell me about Oslo.")
    shown = ""
    seen = []
    async for event in engine.run_turn(chat.id, turn):
        seen.append(event)
        if event.type == "text_delta":
            shown += event.text
            if shown == "Oslo is big.":
                await engine.stop("t1")
    assert seen[-1].type == "turn_aborted" and seen[-1].reason == "stopped"
    answer = (await engine.store.list_messages(chat.id))[-1]
    assert [p for p in answer.parts if isinstance(p, TextPart)] == [
        TextPart(text="Oslo is big.", citations=(citation,))]
