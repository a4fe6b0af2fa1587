"""Earlier turns' thinking goes back to a model that keeps it (``ReasoningReplay.ALL``:
Claude Opus 4.5 and later), byte-exact, signatures and ``redacted_thinking`` included;
other models get none (providers-wire.md section 5.5: earlier turns' thinking "may be
omitted (the API filters them)"; docs/decisions.md, wire5)."""

from __future__ import annotations

import json

import attrs

from tests.providers.support import message as msg
from tests.providers.test_anthropic_codec import make_call, payload, result
from turnstate.core._conversation import ReasoningPart, Role, TextPart, ToolCallPart
from turnstate.core._registry import DEFAULT_REGISTRY, ReasoningReplay
from turnstate.emulators._anthropic import AnthropicEmulator
from turnstate.providers._protocol import ProviderResponse
from turnstate.providers.anthropic import AnthropicAdapter

OPUS = DEFAULT_REGISTRY.model("anthropic", "claude-opus-4-6")
EMULATOR = AnthropicEmulator()
SNAPSHOT = "claude-opus-4-6-20260201"  # what the stream names: a dated snapshot


def signed(text: str, model: str = SNAPSHOT) -> ReasoningPart:
    return ReasoningPart(provider="anthropic", model=model, kind="thinking", text=text,
                         signature=EMULATOR.sign(text))


REDACTED = ReasoningPart(provider="anthropic", model=SNAPSHOT, kind="redacted_thinking",
                         data=EMULATOR.redacted_data("hidden ü"))


def use(call_id: str) -> ToolCallPart:
    return ToolCallPart(call_id=call_id, name="weather", arguments='{"city": "Paris"}',
                        provider="anthropic", model=SNAPSHOT)


def test_the_registry_names_the_models_that_keep_earlier_thinking() -> None:
    kept = {m.name for m in DEFAULT_REGISTRY.models.values()
            if m.provider == "anthropic" and m.reasoning_replay is ReasoningReplay.ALL}
    assert kept == {"claude-opus-4-6", "claude-sonnet-4-6"}


def test_earlier_thinking_goes_back_unchanged_to_a_model_that_keeps_it() -> None:
    first, second = signed("Let me think: ü \u2028 \"quoted\""), signed("Now answer.")
    history = (msg(1, Role.USER, TextPart(text="weather?")),
               msg(2, Role.ASSISTANT, first, REDACTED, use("A"), result("A"), second,
                   TextPart(text="Sunny.")))
    body = payload(make_call(*history, model=OPUS))
    assistant = body["messages"][1]
    assert assistant["content"][:2] == [
        {"type": "thinking", "thinking": first.text, "signature": first.signature},
        {"type": "redacted_thinking", "data": REDACTED.data}]
    assert body["messages"][3]["content"][0] == {
        "type": "thinking", "thinking": second.text, "signature": second.signature}
    assert EMULATOR.check_thinking(body) is None  # every signature verifies
    sonnet = payload(make_call(*history))
    assert "thinking" not in json.dumps(sonnet["messages"])


def test_another_models_thinking_stays_out() -> None:
    history = (msg(1, Role.USER, TextPart(text="q")),
               msg(2, Role.ASSISTANT, signed("x", "claude-sonnet-4-5"), use("A"), result("A"),
                   TextPart(text="ok")))
    assert "thinking" not in json.dumps(payload(make_call(*history, model=OPUS))["messages"])


def test_the_loop_is_a_byte_prefix_of_the_next_turn_with_thinking() -> None:
    """The turn's last request is a byte prefix of the next turn's: the cache holds."""
    adapter = AnthropicAdapter()
    first = make_call(user_text="weather?", model=OPUS)
    made = (signed("Checking the weather."), REDACTED, use("A"))
    loop = adapter.extend_loop(first, ProviderResponse(response_id="m", parts=made),
                               [result("A")])
    last = attrs.evolve(first, loop_messages=loop, iteration=1)
    committed = (msg(1, Role.USER, TextPart(text="weather?")),
                 msg(2, Role.ASSISTANT, *made, result("A"), TextPart(text="Sunny.")))
    sent = [json.dumps(m) for m in payload(last)["messages"]]
    after = [json.dumps(m) for m in payload(make_call(*committed, model=OPUS,
                                                     user_text="ok"))["messages"]]
    assert after[:len(sent)] == sent
