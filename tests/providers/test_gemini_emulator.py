"""The Gemini Interactions emulator over loopback: chains, rules, signatures, faults."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from tests.providers.support import ChainedEnv, chained_env, cursor_defaults, message
from turnstate.core._conversation import (
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from turnstate.core._decisions import Strategy
from turnstate.core._errors import (
    CursorRejected,
    FatalProviderError,
    ProviderProtocolError,
    TransientProviderError,
)
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.emulators import Fault, GeminiInteractionsEmulator, Reply
from turnstate.emulators._base import items_from_messages
from turnstate.providers import ProviderResponse
from turnstate.providers._sse import SseDecoder
from turnstate.providers.gemini_interactions import GeminiInteractionsAdapter, parse_response_body

FLASH = DEFAULT_REGISTRY.model("gemini", "gemini-2.5-flash")
PRO = DEFAULT_REGISTRY.model("gemini", "gemini-2.5-pro")
TOOLS = (ToolSpec(name="getWeather", parameters={
    "type": "object", "properties": {"location": {"type": "string"}}}),)
Env = ChainedEnv


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    def adapter(base_url: str) -> GeminiInteractionsAdapter:
        return GeminiInteractionsAdapter(base_url=base_url, api_key="test-key")

    async with chained_env(GeminiInteractionsEmulator(), adapter,
                           defaults=cursor_defaults(FLASH, TOOLS),
                           auth=lambda key: {"x-goog-api-key": key}) as rig:
        yield rig


def results_for(response: ProviderResponse) -> tuple[ToolResultPart, ...]:
    return tuple(ToolResultPart(call_id=c.call_id, name=c.name, output=f"sunny-{i}")
                 for i, c in enumerate(response.tool_calls))


async def test_cursor_conversations_equal_the_committed_history(env: Env) -> None:
    """Replay, tool loop chained by id, a cursor turn, expiry and replay with signatures:
    after every turn the newest id stands for exactly the committed history."""
    text = "Weather? [[call:getWeather]] [[think]]"
    first, _ = await env.run(env.call(strategy=Strategy.REPLAY, user_text=text))
    results = results_for(first)
    second, _ = await env.run(env.call(cursor=first.response_id, tool_results=results,
                                       iteration=1))
    history = [message(1, Role.USER, TextPart(text=text)),
               message(2, Role.ASSISTANT, *first.parts, *results, *second.parts)]
    assert second.response_id is not None
    assert env.emulator.conversation_for(second.response_id) == items_from_messages(history)

    third, _ = await env.run(env.call(cursor=second.response_id, user_text="Thanks"))
    history += [message(3, Role.USER, TextPart(text="Thanks")),
                message(4, Role.ASSISTANT, *third.parts)]
    assert third.response_id is not None
    assert env.emulator.conversation_for(third.response_id) == items_from_messages(history)

    env.emulator.expire(third.response_id)
    with pytest.raises(CursorRejected) as caught:
        await env.run(env.call(cursor=third.response_id, user_text="More"))
    assert caught.value.reason == "cursor_expired" and caught.value.status == 404
    fourth, _ = await env.run(env.call(strategy=Strategy.REPLAY, history=tuple(history),
                                       user_text="More"))
    history += [message(5, Role.USER, TextPart(text="More")),
                message(6, Role.ASSISTANT, *fourth.parts)]
    assert env.emulator.conversation_for(fourth.response_id or "") == \
        items_from_messages(history)
    replayed = env.emulator.requests[-1].json["input"]
    # every interaction opens with a signed thought (as recorded; wire10): three answers
    assert [s["type"] for s in replayed].count("thought") == 3
    assert "signature" in next(s for s in replayed if s["type"] == "function_call")


async def test_thoughts_and_signed_calls(env: Env) -> None:
    """[[think]] gives a thought step with summary and signature; the call is signed."""
    response, deltas = await env.run(env.call(strategy=Strategy.REPLAY,
                                              user_text="[[think]] [[call:getWeather]]"))
    thought, tool_call = response.parts
    assert isinstance(thought, ReasoningPart) and thought.kind == "thought"
    assert thought.signature and thought.text.startswith("Thinking about")
    assert isinstance(tool_call, ToolCallPart) and tool_call.signature
    assert re.fullmatch(r"[0-9a-z]{8}", tool_call.call_id)
    assert response.finish_reason == "tool_calls"
    assert any(type(d).__name__ == "ReasoningDelta" for d in deltas)


async def test_forged_signature_is_refused(env: Env) -> None:
    """A thought signature the server never issued: 400 "Corrupted thought signature."."""
    history = (message(1, Role.USER, TextPart(text="q")), message(2, Role.ASSISTANT,
               ReasoningPart(provider="gemini", model="gemini-2.5-flash", kind="thought",
                             signature="Zm9yZ2Vk"), TextPart(text="a")))
    with pytest.raises(FatalProviderError, match="Corrupted thought signature"):
        await env.run(env.call(strategy=Strategy.REPLAY, history=history, user_text="n"))
    # The same history to another model leaves the signature out and is accepted.
    response, _ = await env.run(env.call(strategy=Strategy.REPLAY, model=PRO,
                                         history=history, user_text="n"))
    assert response.finish_reason == "stop"


async def test_ids_and_event_order(env: Env) -> None:
    """v1_ ids; the stream runs created, status_update, steps, completed, done."""
    env.emulator.model.push(Reply(text="Two words."))
    async with env.session.post(env.url, json={"model": "gemini-2.5-flash", "input": "hi",
                                               "stream": True},
                                headers={"x-goog-api-key": "k"}) as response:
        events = SseDecoder().feed(await response.read())
    names = [e.event for e in events]
    assert names == ["interaction.created", "interaction.status_update",
                     "step.start", "step.delta", "step.stop",  # the signed thought (wire10)
                     "step.start", "step.delta", "step.delta", "step.stop",
                     "interaction.completed", "done"]
    assert events[-1].data == "[DONE]"
    (interaction_id,) = env.emulator.interactions
    assert re.fullmatch(r"v1_[A-Za-z0-9_-]+", interaction_id)


async def test_unknown_and_malformed_ids(env: Env) -> None:
    """Unknown id: 404 not_found → cursor_expired; malformed: 400 → cursor_invalid."""
    status, body = await env.post({"model": "m", "input": "hi",
                                   "previous_interaction_id": "v1_bm9wZQ"})
    assert status == 404 and body == {"error": {
        "code": "not_found",
        "message": "Previous interaction with id 'v1_bm9wZQ' was not found or has expired."}}
    status, body = await env.post({"model": "m", "input": "hi",
                                   "previous_interaction_id": "resp_123"})
    assert status == 400 and body["error"]["code"] == "invalid_argument"
    with pytest.raises(CursorRejected) as caught:
        await env.run(env.call(cursor="not an id!", user_text="x"))
    assert caught.value.reason == "cursor_invalid"


async def test_store_false_and_eviction(env: Env) -> None:
    """store:false is not kept; evict_all drops every chain; conversations stay readable."""
    status, body = await env.post({"model": "m", "input": "hi", "store": False})
    assert status == 200 and not env.emulator.stored(body["id"])
    status, _ = await env.post({"model": "m", "input": "again",
                                "previous_interaction_id": body["id"]})
    assert status == 404
    first, _ = await env.run(env.call(strategy=Strategy.REPLAY, user_text="a"))
    env.emulator.evict_all()
    with pytest.raises(CursorRejected):
        await env.run(env.call(cursor=first.response_id, user_text="b"))
    assert [i.kind for i in env.emulator.conversation_for(first.response_id or "")] == [
        "user", "assistant"]


async def test_tool_pairing_rules(env: Env) -> None:
    """A pending call chained with new text, and an orphan result, are refused."""
    first, _ = await env.run(env.call(strategy=Strategy.REPLAY,
                                      user_text="[[call:getWeather]]"))
    pending = first.tool_calls[0].call_id
    with pytest.raises(FatalProviderError) as caught:
        await env.run(env.call(cursor=first.response_id, user_text="skip it"))
    assert caught.value.detail == f"No tool output found for function call {pending}."
    orphan = (ToolResultPart(call_id="zzzz9999", name="getWeather", output="x"),)
    with pytest.raises(FatalProviderError, match="No tool call found for function call "
                                                 "output with call_id zzzz9999"):
        await env.run(env.call(cursor=first.response_id, tool_results=orphan, iteration=1))


async def test_request_validation_and_auth(env: Env) -> None:
    """No model, no input, a bad step type, a non-function tool, and no key."""
    assert (await env.post({"input": "hi"}))[0] == 400
    assert (await env.post({"model": "m"}))[0] == 400
    status, body = await env.post({"model": "m", "input": [{"type": "bogus"}]})
    assert status == 400 and "bogus" in body["error"]["message"]
    status, _ = await env.post({"model": "m", "input": "hi", "tools": [{"name": "x"}]})
    assert status == 400
    status, body = await env.post({"model": "m", "input": "hi"}, key=None)
    assert status == 403 and body["error"]["code"] == "permission_denied"


async def test_non_streaming_body_and_retrieve(env: Env) -> None:
    """stream false returns the interaction body; GET and DELETE work on stored ids."""
    env.emulator.model.push(Reply(text="plain"))
    status, body = await env.post({"model": "gemini-2.5-flash", "input": [
        {"type": "text", "text": "content list"}]})
    assert status == 200 and body["status"] == "completed"
    thought, text = parse_response_body(body).parts  # a signed thought first (wire10)
    assert isinstance(thought, ReasoningPart) and thought.signature and not thought.text
    assert text == TextPart(text="plain")
    assert env.emulator.conversation_for(body["id"])[0].text == "content list"
    async with env.session.get(f"{env.url}/{body['id']}") as response:
        assert (await response.json())["id"] == body["id"]
    async with env.session.delete(f"{env.url}/{body['id']}") as response:
        assert response.status == 200
    async with env.session.get(f"{env.url}/{body['id']}") as response:
        assert response.status == 404


async def test_usage_counts_the_chain(env: Env) -> None:
    """With ``cursor_usage="whole"`` chained calls report the whole conversation as
    input, its prefix as cached once it is 1,024 tokens or more (implicit caching)."""
    env.emulator.cursor_usage = "whole"
    first, _ = await env.run(env.call(strategy=Strategy.REPLAY, user_text="x" * 8000))
    second, _ = await env.run(env.call(cursor=first.response_id, user_text="y"))
    assert first.usage.cached_input_tokens == 0 and first.usage.input_tokens > 2000
    assert second.usage.cached_input_tokens >= 0.95 * first.usage.input_tokens
    assert second.usage.input_tokens > second.usage.cached_input_tokens
    short, _ = await env.run(env.call(strategy=Strategy.REPLAY, user_text="z" * 300))
    again, _ = await env.run(env.call(cursor=short.response_id, user_text="y"))
    assert again.usage.cached_input_tokens == 0


async def test_faults(env: Env) -> None:
    """Status faults are retried, a cut stream is not, a malformed frame is a protocol
    error; the request log holds every attempt with the key redacted."""
    env.emulator.faults.push(Fault(status=503, body={"error": {"code": "unavailable",
                                                               "message": "busy"}}))
    await env.run(env.call(strategy=Strategy.REPLAY, user_text="hi"))
    assert len(env.emulator.requests) == 2 and len(env.sleeps.delays) == 1
    env.emulator.faults.push(Fault(cut_after=3))
    with pytest.raises(TransientProviderError):
        await env.run(env.call(strategy=Strategy.REPLAY, user_text="one two three"))
    assert len(env.emulator.requests) == 3
    env.emulator.faults.push(Fault(malformed_after=1))
    with pytest.raises(ProviderProtocolError):
        await env.run(env.call(strategy=Strategy.REPLAY, user_text="hi"))
    assert all(r.headers["x-goog-api-key"] == "<redacted>" for r in env.emulator.requests)


async def test_a_cursor_turn_reports_its_new_input_by_default(env: Env) -> None:
    """As the recordings do (``multi-turn-stateful``: 12 input tokens on the second
    turn): the stored conversation is read but not counted in the usage."""
    first, _ = await env.run(env.call(strategy=Strategy.REPLAY, user_text="x" * 8000))
    second, _ = await env.run(env.call(cursor=first.response_id, user_text="y"))
    assert first.usage.input_tokens > 2000
    assert 0 < second.usage.input_tokens < 100
    assert second.usage.cached_input_tokens <= second.usage.input_tokens
