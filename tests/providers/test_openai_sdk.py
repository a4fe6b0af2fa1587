"""The official ``openai`` SDK talks to the Responses emulator."""

from __future__ import annotations

from collections.abc import AsyncIterator

import openai
import pytest

from turnstate.emulators import EmulatorServer, OpenAIResponsesEmulator, Reply


@pytest.fixture
async def client() -> AsyncIterator[tuple[openai.AsyncOpenAI, OpenAIResponsesEmulator]]:
    emulator = OpenAIResponsesEmulator()
    async with EmulatorServer(emulator) as server:
        sdk = openai.AsyncOpenAI(base_url=server.base_url + OpenAIResponsesEmulator.API_PREFIX,
                                 api_key="test-key", max_retries=0)
        try:
            yield sdk, emulator
        finally:
            await sdk.close()


async def test_sdk_creates_a_response(
    client: tuple[openai.AsyncOpenAI, OpenAIResponsesEmulator],
) -> None:
    """A non-streaming create returns a typed Response with text, id and usage."""
    sdk, emulator = client
    emulator.model.push(Reply(text="Hello from the emulator."))
    response = await sdk.responses.create(model="gpt-4o", input="Hi", instructions="Be kind.")
    assert response.id.startswith("resp_") and response.status == "completed"
    assert response.output_text == "Hello from the emulator."
    assert response.usage is not None and response.usage.input_tokens > 0
    chained = await sdk.responses.create(model="gpt-4o", input="Again",
                                         previous_response_id=response.id)
    assert chained.previous_response_id == response.id


async def test_sdk_streams_a_response(
    client: tuple[openai.AsyncOpenAI, OpenAIResponsesEmulator],
) -> None:
    """A streamed create yields the typed events in order, ending with completed."""
    sdk, emulator = client
    emulator.model.push(Reply(text="Streamed in words."))
    stream = await sdk.responses.create(model="gpt-4o", input="Hi", stream=True)
    types: list[str] = []
    deltas: list[str] = []
    async for event in stream:
        types.append(event.type)
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
        if event.type == "response.completed":
            assert event.response.output_text == "Streamed in words."
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    assert "".join(deltas) == "Streamed in words." and len(deltas) == 3


async def test_sdk_sees_the_documented_cursor_error(
    client: tuple[openai.AsyncOpenAI, OpenAIResponsesEmulator],
) -> None:
    """An unknown previous_response_id raises BadRequestError with the documented code."""
    sdk, _ = client
    with pytest.raises(openai.BadRequestError) as caught:
        await sdk.responses.create(model="gpt-4o", input="Hi",
                                   previous_response_id="resp_000404")
    assert caught.value.status_code == 400
    assert caught.value.code == "previous_response_not_found"
    assert caught.value.param == "previous_response_id"
    assert caught.value.type == "invalid_request_error"
    assert "resp_000404" in caught.value.message
