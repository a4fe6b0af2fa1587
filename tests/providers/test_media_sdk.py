"""The official SDKs send images and PDFs to the emulators in their own request shapes,
and the emulators echo what arrived (issue 23 item 2): ``openai`` (Responses and Chat
Completions), ``anthropic`` and ``google-genai``'s Interactions client, over loopback.
DeepSeek's emulator answers an image part with the API's 400."""

from __future__ import annotations

import base64

import anthropic
import openai
import pytest
from google import genai

from turnstate.emulators import (
    AnthropicEmulator,
    ChatCompletionsEmulator,
    DeepSeekEmulator,
    EmulatorServer,
    GeminiInteractionsEmulator,
    OpenAIResponsesEmulator,
)

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 1_016
B64 = base64.b64encode(PNG).decode()
PDF64 = base64.b64encode(b"%PDF-1.4 /Type /Page").decode()
ECHO = "Attached: an image/png of 1,024 bytes; an application/pdf of 20 bytes."


async def test_openai_responses_sdk_sends_an_input_image_and_file() -> None:
    emulator = OpenAIResponsesEmulator()
    async with EmulatorServer(emulator) as server:
        sdk = openai.AsyncOpenAI(base_url=server.base_url + emulator.API_PREFIX,
                                 api_key="k", max_retries=0)
        response = await sdk.responses.create(model="gpt-4o", input=[{
            "role": "user", "content": [
                {"type": "input_text", "text": "What are these?"},
                {"type": "input_image", "image_url": f"data:image/png;base64,{B64}",
                 "detail": "auto"},
                {"type": "input_file", "filename": "a.pdf",
                 "file_data": f"data:application/pdf;base64,{PDF64}"}]}])
        await sdk.close()
    assert ECHO in response.output_text


async def test_chat_completions_sdk_sends_image_url_and_file_parts() -> None:
    emulator = ChatCompletionsEmulator()
    async with EmulatorServer(emulator) as server:
        sdk = openai.AsyncOpenAI(base_url=server.base_url + emulator.API_PREFIX,
                                 api_key="k", max_retries=0)
        completion = await sdk.chat.completions.create(model="gpt-4o", messages=[{
            "role": "user", "content": [
                {"type": "text", "text": "What are these?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}},
                {"type": "file", "file": {"filename": "a.pdf",
                                          "file_data": f"data:application/pdf;base64,{PDF64}"}},
            ]}])
        await sdk.close()
    assert ECHO in (completion.choices[0].message.content or "")


async def test_deepseek_refuses_an_image_part_as_its_api_does() -> None:
    emulator = DeepSeekEmulator()
    async with EmulatorServer(emulator) as server:
        sdk = openai.AsyncOpenAI(base_url=server.base_url + emulator.API_PREFIX,
                                 api_key="k", max_retries=0)
        with pytest.raises(openai.BadRequestError, match="unknown variant `image_url`"):
            await sdk.chat.completions.create(model="deepseek-v4-flash", messages=[{
                "role": "user", "content": [
                    {"type": "text", "text": "See"},
                    {"type": "image_url", "image_url": {"url": "https://a.example/b.png"}}]}])
        await sdk.close()


async def test_anthropic_sdk_sends_image_and_document_blocks() -> None:
    emulator = AnthropicEmulator()
    async with EmulatorServer(emulator) as server:
        sdk = anthropic.AsyncAnthropic(api_key="k", base_url=server.base_url, max_retries=0)
        message = await sdk.messages.create(model="claude-sonnet-4-5", max_tokens=256, messages=[{
            "role": "user", "content": [
                {"type": "text", "text": "What are these?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": B64}},
                {"type": "document", "source": {"type": "base64",
                                                "media_type": "application/pdf",
                                                "data": PDF64}}]}])
        await sdk.close()
    assert ECHO in "".join(b.text for b in message.content if b.type == "text")


async def test_gemini_sdk_sends_image_and_document_content() -> None:
    emulator = GeminiInteractionsEmulator()
    async with EmulatorServer(emulator) as server:
        sdk = genai.Client(api_key="k", http_options={"base_url": server.base_url})
        interaction = await sdk.aio.interactions.create(model="gemini-2.5-flash", input=[
            {"type": "text", "text": "What are these?"},
            {"type": "image", "data": B64, "mime_type": "image/png"},
            {"type": "document", "data": PDF64, "mime_type": "application/pdf"}])
        await sdk.aio.aclose()
    assert ECHO in (interaction.output_text or "")
