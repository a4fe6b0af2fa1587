"""Both OpenAI emulators refuse what OpenAI documents it refuses (wire9): more than 500
images a request, an image over 20MB, more than 50MB of images a request, and JSON mode
(``json_object``) whose messages never say "json" (Chat Completions counts every
message, ``system`` too; Responses counts input messages, not ``instructions``)."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from turnstate.emulators import ChatCompletionsEmulator, EmulatorServer, OpenAIResponsesEmulator
from turnstate.emulators._openai_limits import (
    CHAT_JSON_WORD,
    MAX_IMAGE_BYTES,
    MAX_IMAGES,
    RESPONSES_JSON_WORD,
    image_problem,
)

Post = Callable[[str, dict[str, Any]], Awaitable[tuple[int, Any]]]
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")).decode()
SMALL = f"data:image/png;base64,{PNG}"
HEADERS = {"Authorization": "Bearer k"}


@pytest.fixture
async def post() -> AsyncIterator[Post]:
    async with EmulatorServer(OpenAIResponsesEmulator()) as responses, \
            EmulatorServer(ChatCompletionsEmulator()) as chat, \
            aiohttp.ClientSession() as session:
        urls = {"responses": responses.base_url + "/v1/responses",
                "chat": chat.base_url + "/v1/chat/completions"}

        async def send(wire: str, body: dict[str, Any]) -> tuple[int, Any]:
            async with session.post(urls[wire], json={"model": "gpt-4o", **body},
                                    headers=HEADERS) as response:
                return response.status, await response.json()
        yield send


def responses_images(*urls: str) -> dict[str, Any]:
    content = [{"type": "input_text", "text": "look"},
               *({"type": "input_image", "image_url": url} for url in urls)]
    return {"input": [{"role": "user", "content": content}]}


def chat_images(*urls: str) -> dict[str, Any]:
    content = [{"type": "text", "text": "look"},
               *({"type": "image_url", "image_url": {"url": url}} for url in urls)]
    return {"messages": [{"role": "user", "content": content}]}


BUILD = {"responses": responses_images, "chat": chat_images}


@pytest.mark.parametrize("wire", sorted(BUILD))
async def test_more_than_500_images_are_refused(post: Post, wire: str) -> None:
    status, _ = await post(wire, BUILD[wire](*[SMALL] * MAX_IMAGES))
    assert status == 200
    status, body = await post(wire, BUILD[wire](*[SMALL] * MAX_IMAGES,
                                                "https://example.test/a.png"))
    assert status == 400, body
    assert body["error"]["type"] == "invalid_request_error"
    assert "501 images" in body["error"]["message"]


def test_an_image_over_20mb_and_50mb_of_images_are_refused() -> None:
    """Measured on an inline image's base64 (a URL has no size here): one image up to a
    20 MiB file's 27,962,028 characters, the request's images up to 50 MiB decoded; the
    same check both emulators run (the count test above goes through their wire)."""
    def url(size: int) -> str:  # the base64 of ``size`` bytes, as long as it would be
        return "data:image/png;base64," + "A" * ((size + 2) // 3 * 4)
    over = responses_images(url(MAX_IMAGE_BYTES + 2))["input"]
    assert image_problem(over, "input") == (
        "input[0].content[1]", "Invalid image at 'input[0].content[1]': about 20971524 "
        "bytes, over the limit of 20971520 bytes (20MB).")
    assert image_problem(responses_images(url(MAX_IMAGE_BYTES))["input"], "input") is None
    three = chat_images(*[url(MAX_IMAGE_BYTES)] * 3)["messages"]
    assert image_problem(three, "messages") == ("messages", (
        "Too much image data in request: 62914563 bytes of images, over the limit of "
        "52428800 bytes (50MB)."))
    assert image_problem(chat_images(*[url(MAX_IMAGE_BYTES)] * 2)["messages"],
                         "messages") is None


async def test_chat_json_mode_needs_the_word_json_in_some_message(post: Post) -> None:
    asked = {"response_format": {"type": "json_object"}}
    status, body = await post("chat", {**asked, "messages": [
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]})
    assert (status, body["error"]["message"], body["error"]["param"]) == (
        400, CHAT_JSON_WORD, "messages")
    for system, user in (("answer in JSON", "hi"), ("be brief", "a Json object please")):
        status, _ = await post("chat", {**asked, "messages": [
            {"role": "system", "content": system}, {"role": "user", "content": user}]})
        assert status == 200
    status, _ = await post("chat", {"messages": [{"role": "user", "content": "hi"}]})
    assert status == 200  # no JSON mode: no rule


async def test_responses_json_mode_reads_input_messages_not_instructions(post: Post) -> None:
    asked = {"text": {"format": {"type": "json_object"}}}
    status, body = await post("responses", {**asked, "instructions": "answer in json",
                                            "input": "hi"})
    assert (status, body["error"]["message"]) == (400, RESPONSES_JSON_WORD)
    status, first = await post("responses", {**asked, "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "JSON please"}]}]})
    assert status == 200
    status, _ = await post("responses", {**asked, "input": "and again",  # chained: said
                                         "previous_response_id": first["id"]})
    assert status == 200
