"""Wire fidelity, round three (issue 24), server side: what the OpenAI reasoning-item
replay (item 5) and the Gemini server-tool steps (item 4) look like on the wire, and
what the emulators enforce for them. Streams hand-written from the providers' docs."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from turnstate.core._conversation import (
    OpaquePart,
    TextPart,
)
from turnstate.emulators import GeminiInteractionsEmulator, OpenAIResponsesEmulator
from turnstate.emulators._base import EmulatorServer
from turnstate.providers._protocol import SseEvent, TextDelta
from turnstate.providers.gemini_interactions import InteractionsStreamParser


def sse(payload: object) -> SseEvent:
    return SseEvent(data=payload if isinstance(payload, str) else json.dumps(payload))


def feed_all(parser: Any, events: list[SseEvent]) -> list[object]:
    out: list[object] = []
    for event in events:
        out.extend(parser.feed(event))
    return out


# --- item 5: OpenAI reasoning items replayed with their id ------------------------------


async def test_responses_emulator_requires_the_reasoning_item_id() -> None:
    """Item 5: the emulator enforces ``ResponseReasoningItemParam`` (``id`` required); a
    reasoning item that carries ``encrypted_content`` is accepted under an id the server
    never stored (as items of ``store: false`` responses are), one without is not."""
    user = {"type": "message", "role": "user", "content": "q"}
    reasoning = {"type": "reasoning", "id": "rs_never_stored", "summary": [],
                 "encrypted_content": "gAAAA-opaque"}
    cases = [([user, {k: v for k, v in reasoning.items() if k != "id"}, user], 400, "id"),
             ([user, reasoning, user], 200, None),
             ([user, {k: v for k, v in reasoning.items() if k != "encrypted_content"}, user],
              404, "rs_never_stored")]
    async with EmulatorServer(OpenAIResponsesEmulator()) as server, \
            aiohttp.ClientSession() as session:
        for items, status, mention in cases:
            async with session.post(server.base_url + "/v1/responses", json={
                    "model": "gpt-5-mini", "input": items, "stream": True},
                    headers={"authorization": "Bearer k"}) as answer:
                body = await answer.text()
                assert answer.status == status, body
                assert mention is None or mention in body


# --- item 4: Gemini Interactions server-tool steps arrive in parts ----------------------


def gemini_event(kind: str, **fields: Any) -> SseEvent:
    return SseEvent(event=kind, data=json.dumps({"event_type": kind, **fields}))


def gemini_search_stream() -> list[SseEvent]:
    """A grounded answer (Interactions streaming, google-genai's StepStart/StepDelta
    types): each server-tool step starts with its id, type and an empty signature; its
    arguments, result, is_error and signature come in step.delta frames of its type."""
    return [
        gemini_event("interaction.created", interaction={
            "id": "v1_search1", "model": "gemini-2.5-flash", "status": "in_progress"}),
        gemini_event("step.start", index=0, step={
            "id": "gs_1", "type": "google_search_call", "signature": ""}),
        gemini_event("step.delta", index=0, delta={
            "type": "google_search_call", "arguments": {"queries": ["weather Oslo"]},
            "signature": "c2lnLWNhbGw="}),
        gemini_event("step.stop", index=0),
        gemini_event("step.start", index=1, step={
            "type": "google_search_result", "call_id": "gs_1", "signature": ""}),
        gemini_event("step.delta", index=1, delta={
            "type": "google_search_result", "result": [{"search_suggestions": "<div/>"}],
            "is_error": False, "signature": "c2lnLXJl"}),
        gemini_event("step.delta", index=1, delta={
            "type": "google_search_result", "result": [], "signature": "c3VsdA=="}),
        gemini_event("step.stop", index=1),
        gemini_event("step.start", index=2, step={"type": "model_output", "content": []}),
        gemini_event("step.delta", index=2, delta={"type": "text", "text": "Cold, 2°C."}),
        gemini_event("step.stop", index=2),
        gemini_event("interaction.completed", interaction={
            "id": "v1_search1", "status": "completed", "model": "gemini-2.5-flash",
            "usage": {"total_input_tokens": 10, "total_output_tokens": 5}}),
    ]


def test_gemini_server_tool_steps_merge_their_deltas() -> None:
    """Item 4: every delta is merged into its step; the opaque steps kept (and replayed
    to the same model) carry the arguments, result, is_error and whole signatures."""
    parser = InteractionsStreamParser()
    deltas = feed_all(parser, gemini_search_stream())
    response = parser.finish()
    assert deltas == [TextDelta(text="Cold, 2°C.")]
    call, result, text = response.parts
    assert isinstance(call, OpaquePart) and isinstance(result, OpaquePart)
    assert json.loads(call.raw) == {"id": "gs_1", "type": "google_search_call",
                                    "signature": "c2lnLWNhbGw=",
                                    "arguments": {"queries": ["weather Oslo"]}}
    assert json.loads(result.raw) == {"type": "google_search_result", "call_id": "gs_1",
                                      "signature": "c2lnLXJlc3VsdA==", "is_error": False,
                                      "result": [{"search_suggestions": "<div/>"}]}
    assert text == TextPart(text="Cold, 2°C.")


@pytest.mark.parametrize(("kind", "fields"), [
    ("code_execution_call", {"arguments": {"code": "print(1)", "language": "python"}}),
    ("url_context_result", {"result": [{"url": "https://example.com", "status": "success"}],
                            "is_error": False}),
    ("mcp_server_tool_call", {"name": "lookup", "server_name": "docs",
                              "arguments": {"q": "x"}}),
])
def test_gemini_other_server_tool_steps_merge_alike(kind: str, fields: dict[str, Any]) -> None:
    """Item 4: the other server-tool step types (the Interactions docs' StepDeltaData
    variants) are merged the same way, including deltas that omit ``type``."""
    parser = InteractionsStreamParser()
    start = {"id": "st_1", "type": kind, "signature": ""}
    feed_all(parser, [
        gemini_event("step.start", index=0, step=start),
        gemini_event("step.delta", index=0, delta={"type": kind, **fields}),
        gemini_event("step.delta", index=0, delta={"signature": "c2ln"}),
        gemini_event("interaction.completed", interaction={
            "id": "v1_x", "status": "completed", "model": "gemini-2.5-flash"})])
    (step,) = parser.finish().parts
    assert isinstance(step, OpaquePart)
    assert json.loads(step.raw) == {**start, **fields, "signature": "c2ln"}


async def test_gemini_emulator_rejects_a_server_step_without_its_fields() -> None:
    """Item 4: the Interactions emulator refuses a replayed google_search_call without its
    arguments, as google-genai's step params require them; the merged one passes."""
    parser = InteractionsStreamParser()
    feed_all(parser, gemini_search_stream())
    call, result, _ = parser.finish().parts
    assert isinstance(call, OpaquePart) and isinstance(result, OpaquePart)
    user = {"type": "user_input", "content": [{"type": "text", "text": "weather?"}]}
    unsigned = [{k: v for k, v in json.loads(p.raw).items() if k != "signature"}
                for p in (call, result)]  # the emulator verifies only signatures it issued
    whole = [user, *unsigned, user]
    cut = [user, {"id": "gs_1", "type": "google_search_call", "signature": ""}, user]
    async with EmulatorServer(GeminiInteractionsEmulator()) as server, \
            aiohttp.ClientSession() as session:
        for steps, status in ((cut, 400), (whole, 200)):
            async with session.post(server.base_url + "/v1beta/interactions", json={
                    "model": "gemini-2.5-flash", "input": steps, "store": False},
                    headers={"x-goog-api-key": "k"}) as answer:
                assert answer.status == status, await answer.text()
