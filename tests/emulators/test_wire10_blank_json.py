"""DeepSeek's JSON mode may answer empty content (its JSON Output guide: the API "may
occasionally return empty content"). Kept, a blank answer was committed as the reply no
JSON parser takes; it is now a retryable failure, ``code`` ``empty_json_output``: sent
again at once when nothing was shown, else the turn fails for the embedder to send
again, its bill kept (wire10)."""

from __future__ import annotations

import json

from turnstate import GenerationSettings, ResponseFormat, TurnEngine, TurnInput
from turnstate.core._conversation import TextPart
from turnstate.emulators import EmulatedProviders
from turnstate.providers._protocol import HttpRequest, ProviderResponse
from turnstate.providers.deepseek import DeepSeekAdapter
from turnstate.testing import emulated_engine, emulated_providers, turn_events

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest

JSON_MODE = GenerationSettings(response_format=ResponseFormat())


def _turn(text: str, settings: GenerationSettings = JSON_MODE) -> TurnInput:
    return TurnInput(provider="deepseek", model="deepseek-chat",
                     system_prompt="Answer in JSON.", user_text=text, settings=settings)


async def test_an_empty_json_answer_is_sent_again_and_the_turn_completes(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders) -> None:
    chat = await emulated_engine.store.create_chat(owner="o")
    events = await turn_events(emulated_engine.run_turn(chat.id, _turn("[[blank_json]] hi")))
    final = events[-1]
    assert final.type == "turn_completed", final
    assert json.loads(final.text) == {}  # the JSON the second answer held
    assert len(emulated_providers.emulators["deepseek"].requests) == 2
    assert final.stats.retries == 1


async def test_a_blank_json_answer_shown_fails_the_turn_retryable_with_its_bill(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders) -> None:
    chat = await emulated_engine.store.create_chat(owner="o")
    events = await turn_events(emulated_engine.run_turn(
        chat.id, _turn("[[blank_json:newlines]] hi")))
    final = events[-1]
    assert final.type == "turn_aborted" and final.reason == "provider_failed", final
    assert "empty_json_output" in (final.detail or "")
    assert final.stats.usage.input_tokens > 0  # the blank answer is billed
    assert len(emulated_providers.emulators["deepseek"].requests) == 1
    again = await turn_events(emulated_engine.run_turn(
        chat.id, _turn("[[blank_json:newlines]] hi")))  # the embedder sends it again
    assert again[-1].type == "turn_completed", again[-1]


async def test_a_blank_answer_outside_json_mode_is_kept(
        emulated_engine: TurnEngine) -> None:
    chat = await emulated_engine.store.create_chat(owner="o")
    events = await turn_events(emulated_engine.run_turn(
        chat.id, _turn("[[blank_json]] hi", GenerationSettings())))
    assert events[-1].type == "turn_completed"


def test_the_check_reads_the_request_only_for_a_blank_answer() -> None:
    adapter = DeepSeekAdapter(api_key="k")
    request = HttpRequest(method="POST", url="u", headers={}, body=b"not json")
    answer = ProviderResponse(response_id="r", parts=(TextPart(text="{}"),),
                              finish_reason="stop")
    assert adapter.checked_response(request, answer) is answer  # the body never decoded
    blank = ProviderResponse(response_id="r", parts=(TextPart(text=" \n"),),
                             finish_reason="stop")
    assert adapter.checked_response(request, blank) is blank  # not JSON mode
