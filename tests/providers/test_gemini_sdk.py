"""The official ``google-genai`` SDK's Interactions client against the Gemini emulator.

The client is built the way a user builds it (an API key and a base URL, nothing else),
so it sends its default path: ``/v1/interactions`` in google-genai 3.6.1.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from google import genai

# The Interactions error classes are re-exported only from this compatibility module.
from google.genai._interactions import NotFoundError

from turnstate.emulators import EmulatorServer, GeminiInteractionsEmulator, Reply

MODEL = "gemini-3-flash-preview"
WEATHER = {"type": "function", "name": "weather", "description": "Weather for a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}

Client = tuple[genai.Client, GeminiInteractionsEmulator]


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    emulator = GeminiInteractionsEmulator()
    async with EmulatorServer(emulator) as server:
        sdk = genai.Client(api_key="test-key", http_options={"base_url": server.base_url})
        try:
            yield sdk, emulator
        finally:
            await sdk.aio.aclose()


async def test_sdk_creates_an_interaction(client: Client) -> None:
    """A non-streaming create returns a typed Interaction with steps, text and usage."""
    sdk, emulator = client
    emulator.model.push(Reply(text="Hello from the emulator."))
    interaction = await sdk.aio.interactions.create(model=MODEL, input="Hi",
                                                    system_instruction="Be kind.")
    assert interaction.id.startswith("v1_") and interaction.status == "completed"
    assert interaction.output_text == "Hello from the emulator."
    thought, step = interaction.steps or []  # a signed thought first, as recorded (wire10)
    assert thought.type == "thought" and step.type == "model_output"
    assert interaction.usage is not None and interaction.usage.total_input_tokens
    (request,) = emulator.requests
    assert request.path == "/v1/interactions"
    assert request.headers["x-goog-api-key"] == "<redacted>" and b"test-key" not in request.body
    fetched = await sdk.aio.interactions.get(interaction.id)
    assert fetched.id == interaction.id and fetched.output_text == interaction.output_text


async def _stream(sdk: genai.Client, **body: Any) -> tuple[list[Any], str]:
    stream = await sdk.aio.interactions.create(model=MODEL, stream=True, **body)
    events = [event async for event in stream]
    (created,) = [e for e in events if e.event_type == "interaction.created"]
    return events, created.interaction.id


async def test_sdk_streams_and_chains_a_tool_loop(client: Client) -> None:
    """A streamed interaction yields the typed step events (thought with signature, two
    signed-or-not calls with argument deltas); chaining the results by
    ``previous_interaction_id`` completes the loop, and the stored chain holds it all."""
    sdk, emulator = client
    events, first_id = await _stream(sdk, input="weather? [[think]] [[call:weather*2]]",
                                     tools=[WEATHER])
    kinds = [e.event_type for e in events]
    assert kinds[:2] == ["interaction.created", "interaction.status_update"]
    assert kinds[-1] == "interaction.completed" and events[-1].interaction.status == \
        "requires_action"
    starts = [e.step for e in events if e.event_type == "step.start"]
    assert [s.type for s in starts] == ["thought", "function_call", "function_call"]
    # FunctionCallStep declares no ``signature``: pydantic keeps it as an extra field.
    assert getattr(starts[1], "signature", None) and not hasattr(starts[2], "signature")
    deltas = [e.delta for e in events if e.event_type == "step.delta"]
    assert [d.type for d in deltas].count("thought_signature") == 1
    arguments = "".join(d.arguments for d in deltas if d.type == "arguments_delta")
    assert arguments == '{"city":"city-value"}' * 2
    results = [{"type": "function_result", "name": "weather", "call_id": call.id,
                "result": "sunny"} for call in starts[1:]]
    final = await sdk.aio.interactions.create(model=MODEL, input=results, tools=[WEATHER],
                                              previous_interaction_id=first_id)
    assert final.previous_interaction_id == first_id and final.status == "completed"
    assert final.output_text == "Tool results: weather=sunny; weather=sunny."
    kinds_stored = [item.kind for item in emulator.conversation_for(final.id)]
    assert kinds_stored == ["user", "tool_call", "tool_call", "tool_result", "tool_result",
                            "assistant"]


async def test_sdk_sees_the_error_for_an_unknown_interaction(client: Client) -> None:
    """An unknown ``previous_interaction_id`` and a GET of an unknown id both raise the
    SDK's NotFoundError with the Interactions error body (the GET's 404 ``not_found`` is
    documented; the create's status is UNCONFIRMED, the emulator answers the same)."""
    sdk, _ = client
    with pytest.raises(NotFoundError) as caught:
        await sdk.aio.interactions.create(model=MODEL, input="Hi",
                                          previous_interaction_id="v1_bm90LXN0b3JlZA")
    assert caught.value.status_code == 404
    assert caught.value.body["error"]["code"] == "not_found"
    assert "v1_bm90LXN0b3JlZA" in caught.value.body["error"]["message"]
    with pytest.raises(NotFoundError) as fetched:
        await sdk.aio.interactions.get("v1_bm90LXN0b3JlZA")
    assert fetched.value.status_code == 404
