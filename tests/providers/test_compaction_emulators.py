"""The emulators compact the way the providers do: Anthropic compacts above its trigger,
streams the block with a ``compaction_delta``, takes it back and refuses a block without
its content; OpenAI takes a stateless chain that starts at a compaction item."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anthropic
import pytest

from tests.providers.support import parse_stream
from turnstate.core._json import JsonObject
from turnstate.emulators import AnthropicEmulator, OpenAIResponsesEmulator
from turnstate.emulators._base import EmulatorServer
from turnstate.providers._sse import SseDecoder
from turnstate.providers.anthropic import AnthropicStreamParser

MODEL = "claude-sonnet-4-6"
BETA = {"anthropic-beta": "compact-2026-01-12"}
EDIT = {"edits": [{"type": "compact_20260112",
                   "trigger": {"type": "input_tokens", "value": 50_000}}]}
LONG = "x" * 120_000  # about 30,000 tokens per message


@pytest.fixture
async def anthropic_rig() -> AsyncIterator[tuple[AnthropicEmulator, str, aiohttp.ClientSession]]:
    emulator = AnthropicEmulator(context_windows={MODEL: 64_000})
    async with EmulatorServer(emulator) as server, aiohttp.ClientSession() as session:
        yield emulator, server.base_url, session


Rig = tuple[AnthropicEmulator, str, aiohttp.ClientSession]


def body(*messages: JsonObject, stream: bool = True, **extra: Any) -> JsonObject:
    return {"model": MODEL, "max_tokens": 256, "messages": list(messages),
            "stream": stream, **extra}


def user(text: str) -> JsonObject:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def assistant(*blocks: JsonObject) -> JsonObject:
    return {"role": "assistant", "content": list(blocks)}


async def post(rig: Rig, payload: JsonObject,
               headers: dict[str, str] | None = None) -> tuple[int, Any]:
    _, base, session = rig
    async with session.post(base + "/v1/messages", json=payload,
                            headers={"x-api-key": "k", **(headers or {})}) as response:
        raw = await response.read()
    if response.status == 200 and payload.get("stream"):
        decoder = SseDecoder()
        return 200, [*decoder.feed(raw), *decoder.close()]
    return response.status, json.loads(raw)


async def test_anthropic_compacts_above_its_trigger_and_streams_a_compaction_delta(
    anthropic_rig: Rig,
) -> None:
    status, events = await post(anthropic_rig, body(
        user(LONG), assistant({"type": "text", "text": "ok"}), user(LONG + "y"),
        context_management=EDIT), BETA)
    assert status == 200
    frames = [json.loads(e.data) for e in events]
    start = next(f for f in frames if f["type"] == "content_block_start")
    assert start["index"] == 0 and start["content_block"] == {
        "type": "compaction", "content": None, "encrypted_content": None}
    delta = next(f["delta"] for f in frames if f["type"] == "content_block_delta")
    assert delta["type"] == "compaction_delta" and delta["content"].startswith("Summary of 3")
    response, _ = parse_stream(AnthropicStreamParser(), events)
    block = json.loads(response.parts[0].raw)  # type: ignore[union-attr]
    assert block == {"type": "compaction", "content": delta["content"],
                     "encrypted_content": delta["encrypted_content"]}
    # The top-level usage is the compacted context; the summarising step is apart.
    assert response.usage.input_tokens < 200
    assert response.metadata["compactionUsage"]["inputTokens"] > 50_000


async def test_below_the_trigger_or_without_the_edit_nothing_compacts(anthropic_rig: Rig) -> None:
    for extra, headers in (({"context_management": EDIT}, BETA), ({}, None)):
        status, events = await post(anthropic_rig, body(user("short"), **extra), headers)
        assert status == 200
        assert all("compaction" not in e.data for e in events)


async def test_the_block_goes_back_and_the_model_sees_only_what_follows(
    anthropic_rig: Rig,
) -> None:
    emulator = anthropic_rig[0]
    block = {"type": "compaction", "content": "Summary: long talk.", "encrypted_content": "e"}
    status, message = await post(anthropic_rig, body(
        user(LONG), assistant(block, {"type": "text", "text": "a"}), user("and now?"),
        stream=False, context_management=EDIT), BETA)
    assert status == 200
    assert message["usage"]["input_tokens"] < 100  # the long message before it is dropped
    assert [i.kind for i in emulator.conversation()] == ["user", "assistant", "user"]
    assert message["content"][0]["type"] == "text"


@pytest.mark.parametrize(("block", "problem"), [
    ({"type": "compaction", "encrypted_content": "e"},
     "messages.1.content.0.compaction.content: Field required"),
    ({"type": "compaction", "content": ""},
     "messages.1.content.0.compaction.content: content can't be empty"),
])
async def test_a_block_without_its_content_is_refused(
    anthropic_rig: Rig, block: JsonObject, problem: str,
) -> None:
    status, error = await post(anthropic_rig, body(user("q"), assistant(block), user("next")),
                               BETA)
    assert status == 400
    assert error["type"] == "error"
    assert error["error"] == {"type": "invalid_request_error", "message": problem}


async def test_a_failed_compaction_is_a_no_op(anthropic_rig: Rig) -> None:
    status, _ = await post(anthropic_rig, body(
        user("q"), assistant({"type": "compaction", "content": None},
                             {"type": "text", "text": "a"}), user("next"), stream=False), BETA)
    assert status == 200


async def test_a_block_is_a_beta_param(anthropic_rig: Rig) -> None:
    """A compaction block sent back in a request that names no beta is refused (only the
    beta params have it), even when the request asks for no compaction itself."""
    block = {"type": "compaction", "content": "Summary."}
    status, error = await post(anthropic_rig, body(user("q"), assistant(block), user("next")))
    assert status == 400
    assert error["error"]["message"].startswith(
        "messages.1.content.0: Input tag 'compaction' found using 'type' does not match")


@pytest.mark.parametrize(("edit", "headers", "problem"), [
    (EDIT, None, "requires the anthropic-beta header compact-2026-01-12"),
    ({"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens",
                                                          "value": 10_000}}]},
     BETA, "trigger.value: Input should be greater than or equal to 50000"),
])
async def test_the_edit_is_checked(
    anthropic_rig: Rig, edit: JsonObject, headers: dict[str, str] | None, problem: str,
) -> None:
    status, error = await post(anthropic_rig, body(user("q"), context_management=edit), headers)
    assert status == 400 and problem in error["error"]["message"]


async def test_a_prompt_over_the_window_is_refused(anthropic_rig: Rig) -> None:
    status, error = await post(anthropic_rig, body(user(LONG), user(LONG), user(LONG)))
    assert status == 400
    assert error["error"]["message"].startswith("prompt is too long: ")
    assert error["error"]["message"].endswith(" tokens > 64000 maximum")


async def test_the_sdk_accumulates_the_compaction_block() -> None:
    """The official SDK's beta stream assembles the block from its ``compaction_delta``."""
    emulator = AnthropicEmulator()
    async with EmulatorServer(emulator) as server:
        sdk = anthropic.AsyncAnthropic(api_key="k", base_url=server.base_url, max_retries=0)
        async with sdk.beta.messages.stream(
                model=MODEL, max_tokens=64, betas=["compact-2026-01-12"],
                context_management=EDIT,  # type: ignore[arg-type]
                messages=[{"role": "user", "content": LONG + "a"},
                          {"role": "assistant", "content": "ok"},
                          {"role": "user", "content": LONG + "b"}]) as stream:
            final = await stream.get_final_message()
        await sdk.close()
    block = final.content[0]
    assert block.type == "compaction"
    assert block.content is not None and block.content.startswith("Summary of 3")
    assert block.encrypted_content == emulator.sign(block.content)


# --- OpenAI: a stateless chain from a compaction item ----------------------------------


@pytest.fixture
async def openai_rig() -> AsyncIterator[tuple[OpenAIResponsesEmulator, str,
                                              aiohttp.ClientSession]]:
    emulator = OpenAIResponsesEmulator(context_windows={"gpt-5-mini": 8_000})
    async with EmulatorServer(emulator) as server, aiohttp.ClientSession() as session:
        yield emulator, server.base_url + "/v1/responses", session


async def responses(rig: Any, payload: JsonObject) -> tuple[int, Any]:
    _, url, session = rig
    async with session.post(url, json={"model": "gpt-5-mini", **payload},
                            headers={"Authorization": "Bearer k"}) as response:
        return response.status, await response.json()


COMPACT = [{"type": "compaction", "compact_threshold": 2_000}]


async def test_openai_takes_a_stateless_chain_that_starts_at_a_compaction_item(
    openai_rig: Any,
) -> None:
    emulator = openai_rig[0]
    long_text = "y" * 10_000  # 2,500 tokens: over the threshold
    status, first = await responses(openai_rig, {"input": long_text,
                                                 "context_management": COMPACT})
    assert status == 200
    item = first["output"][-1]
    assert item["type"] == "compaction"
    status, second = await responses(openai_rig, {"input": [
        {"type": "compaction", "encrypted_content": item["encrypted_content"]},
        {"type": "message", "role": "user", "content": "and then?"}],
        "context_management": COMPACT})
    assert status == 200
    assert second["usage"]["input_tokens"] < 100  # counted from the compaction item
    # What the new response stands for is still the whole conversation.
    assert [i.kind for i in emulator.conversation_for(second["id"])] == [
        "user", "assistant", "user", "assistant"]


async def test_openai_refuses_a_compaction_item_without_its_payload(openai_rig: Any) -> None:
    status, error = await responses(openai_rig, {"input": [
        {"type": "compaction"}, {"type": "message", "role": "user", "content": "q"}]})
    assert status == 400
    assert error["error"]["code"] == "missing_required_parameter"
    assert error["error"]["param"] == "input[0].encrypted_content"


async def test_openai_refuses_an_input_over_the_window(openai_rig: Any) -> None:
    status, error = await responses(openai_rig, {"input": "z" * 40_000})
    assert status == 400 and error["error"]["code"] == "context_length_exceeded"
