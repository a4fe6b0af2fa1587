"""A PDF to OpenAI's models over Chat Completions (embed5). docs/api.md told an embedder
whose `FilePart` by URL Chat Completions refuses to "send the bytes", and OpenAI's File
inputs guide takes a PDF as a Chat Completions ``file`` part (``file_data``, no URL) on
its vision models; the codec writes that part. But the registry listed gpt-4o,
gpt-4o-mini and gpt-4.1-nano on ``openai-compatible`` as taking images only, so the
bytes were refused too (``content[1]``: "does not take file input") and a PDF could
reach no Chat Completions model at all."""

from __future__ import annotations

import json

import pytest

from turnstate import FilePart, InvalidInput, TextPart, TurnEngine, TurnInput
from turnstate.emulators import EmulatedProviders
from turnstate.testing import emulated_engine, emulated_providers, turn_events

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest

PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF"


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4o-mini", "gpt-4.1-nano"])
async def test_a_pdf_s_bytes_reach_openai_s_chat_completions_models(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders,
        model: str) -> None:
    chat = await emulated_engine.store.create_chat(owner="o")
    turn = TurnInput(provider="openai-compatible", model=model, system_prompt="s",
                     content=(TextPart(text="Summarise"),
                              FilePart(data=PDF, filename="a.pdf")))
    events = await turn_events(emulated_engine.run_turn(chat.id, turn))
    final = events[-1]
    assert final.type == "turn_completed"
    assert "Attached: an application/pdf of 44 bytes" in final.text
    body = json.loads(emulated_providers.emulators["openai-compatible"].requests[-1].body)
    part = body["messages"][-1]["content"][1]
    assert part["type"] == "file" and part["file"]["filename"] == "a.pdf"
    assert part["file"]["file_data"].startswith("data:application/pdf;base64,")


async def test_a_pdf_url_there_is_still_refused_naming_the_url(
        emulated_engine: TurnEngine) -> None:
    chat = await emulated_engine.store.create_chat(owner="o")
    turn = TurnInput(provider="openai-compatible", model="gpt-4o", system_prompt="s",
                     content=(TextPart(text="x"), FilePart(url="https://example.com/a.pdf")))
    with pytest.raises(InvalidInput) as refused:
        await turn_events(emulated_engine.run_turn(chat.id, turn))
    assert refused.value.field == "content[1].url"
