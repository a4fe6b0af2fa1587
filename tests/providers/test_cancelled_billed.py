"""A response or interaction the provider cancelled is no answer (the turn aborts,
wire6), but the provider bills what it read and wrote before the cancel: the terminal
frame's usage joins the turn's bill (``provider_batches``' ``cuts``) instead of an
unknown cost."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.providers.test_cut_usage import Scripted, cuts_of
from turnstate.core._conversation import Usage
from turnstate.providers._protocol import SseEvent, sse_event
from turnstate.providers.gemini_interactions import GeminiInteractionsAdapter
from turnstate.providers.openai_responses import OpenAIResponsesAdapter


def frames(*named: tuple[str, Any]) -> list[SseEvent]:
    return [sse_event(json.dumps(data), name, None) for name, data in named]


async def test_a_cancelled_response_bills_its_terminal_usage() -> None:
    stream = frames(
        ("response.created", {"type": "response.created", "response": {
            "id": "resp_1", "status": "in_progress", "usage": None}}),
        ("response.output_text.delta", {"type": "response.output_text.delta",
                                        "output_index": 0, "delta": "Half an"}),
        ("response.completed", {"type": "response.completed", "response": {
            "id": "resp_1", "status": "cancelled", "output": [], "usage": {
                "input_tokens": 1200, "output_tokens": 40,
                "input_tokens_details": {"cached_tokens": 1000}}}}))
    cuts = await cuts_of(Scripted(stream), OpenAIResponsesAdapter(api_key="k"))
    assert cuts == [Usage(input_tokens=1200, output_tokens=40, cached_input_tokens=1000)]


@pytest.mark.parametrize("status", ["cancelled"])
async def test_a_cancelled_interaction_bills_its_terminal_usage(status: str) -> None:
    stream = frames(
        ("interaction.created", {"interaction": {"id": "v1_1", "status": "in_progress"},
                                 "event_type": "interaction.created"}),
        ("step.start", {"index": 0, "step": {"type": "model_output"},
                        "event_type": "step.start"}),
        ("step.delta", {"index": 0, "delta": {"type": "text", "text": "Half"},
                        "event_type": "step.delta"}),
        ("interaction.completed", {"interaction": {"id": "v1_1", "status": status, "usage": {
            "total_input_tokens": 300, "total_output_tokens": 7}},
            "event_type": "interaction.completed"}))
    cuts = await cuts_of(Scripted(stream), GeminiInteractionsAdapter(api_key="k"))
    assert cuts == [Usage(input_tokens=300, output_tokens=7)]
