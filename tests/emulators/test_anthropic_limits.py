"""The Anthropic emulator refuses what the Messages API refuses (emul7): a body over
32 MB (413 ``request_too_large``), more than 100 images and documents in a request, a
message without content that is not the final assistant one, and empty text blocks in
``system`` or inside a ``tool_result`` (400 ``invalid_request_error``)."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from turnstate.emulators import AnthropicEmulator, EmulatorServer
from turnstate.emulators._anthropic_limits import MAX_IMAGE_BYTES, MAX_REQUEST_BYTES

PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")).decode()
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}


@pytest.fixture
async def post() -> AsyncIterator[Any]:
    async with EmulatorServer(AnthropicEmulator()) as server, \
            aiohttp.ClientSession() as session:
        async def send(messages: list[Any], **extra: Any) -> tuple[int, Any]:
            body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": messages,
                    **extra}
            async with session.post(server.base_url + "/v1/messages", json=body,
                                    headers=HEADERS) as response:
                return response.status, await response.json()
        yield send


def user(*blocks: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


async def test_a_body_over_32_mb_is_413_request_too_large(post: Any) -> None:
    status, body = await post([user({"type": "text", "text": "a" * MAX_REQUEST_BYTES})])
    assert (status, body["type"], body["error"]["type"]) == (413, "error", "request_too_large")
    status, _ = await post([user({"type": "text", "text": "a" * 1000})])
    assert status == 200


async def test_more_than_100_images_and_documents_are_refused(post: Any) -> None:
    status, _ = await post([user(*[IMAGE] * 100, {"type": "text", "text": "hi"})])
    assert status == 200
    document = {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                               "data": "doc"}}
    call = {"type": "tool_use", "id": "toolu_1", "name": "see", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [IMAGE]}
    status, body = await post([user(*[IMAGE] * 99, {"type": "text", "text": "hi"}),
                               {"role": "assistant", "content": [call]},
                               user(result, document)])
    assert (status, body["error"]["type"]) == (400, "invalid_request_error")
    assert body["error"]["message"] == "too many images and documents: 100 + 1 > 100"


@pytest.mark.parametrize("empty", ["", []])
async def test_a_message_without_content_is_refused_but_a_final_prefill(
        post: Any, empty: Any) -> None:
    status, body = await post([{"role": "user", "content": "hi"},
                               {"role": "assistant", "content": empty},
                               {"role": "user", "content": "again"}])
    assert status == 400
    assert body["error"]["message"] == ("messages.1: all messages must have non-empty content "
                                        "except for the optional final assistant message")
    status, body = await post([{"role": "user", "content": empty}])
    assert status == 400 and body["error"]["message"].startswith("messages.0: ")
    status, _ = await post([{"role": "user", "content": "hi"},
                            {"role": "assistant", "content": empty}])
    assert status == 200


async def test_empty_text_in_system_or_a_tool_result_is_refused(post: Any) -> None:
    status, body = await post([user({"type": "text", "text": "hi"})],
                              system=[{"type": "text", "text": ""}])
    assert (status, body["error"]["message"]) == (
        400, "system: text content blocks must be non-empty")
    call = {"type": "tool_use", "id": "toolu_1", "name": "see", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1",
              "content": [{"type": "text", "text": ""}]}
    status, body = await post([user({"type": "text", "text": "hi"}),
                               {"role": "assistant", "content": [call]}, user(result)])
    assert (status, body["error"]["message"]) == (
        400, "messages: text content blocks must be non-empty")


async def test_an_image_over_10_mb_of_base64_is_refused(post: Any) -> None:
    large = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "A" * (MAX_IMAGE_BYTES + 4)}}
    status, body = await post([user({"type": "text", "text": "hi"}, large)])
    assert (status, body["error"]["message"]) == (
        400, "messages.0.content.1.image.source.base64: image exceeds 10 MB maximum: "
             f"{MAX_IMAGE_BYTES + 4} bytes > {MAX_IMAGE_BYTES} bytes")
