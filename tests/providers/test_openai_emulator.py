"""The OpenAI Responses emulator over loopback: chains, rules, compaction, faults."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator

import attrs
import pytest

from tests.providers.support import ChainedEnv, chained_env, cursor_defaults, message
from turnstate.core._context import ContextSettings
from turnstate.core._conversation import (
    Message,
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
from turnstate.emulators import Fault, OpenAIResponsesEmulator, Reply
from turnstate.emulators._base import ScriptedCall, items_from_messages
from turnstate.providers import ProviderResponse
from turnstate.providers.openai_responses import OpenAIResponsesAdapter, parse_response_body

GPT5 = DEFAULT_REGISTRY.model("openai", "gpt-5")
GPT4O = DEFAULT_REGISTRY.model("openai", "gpt-4o")
TOOLS = (ToolSpec(name="weather", parameters={
    "type": "object", "properties": {"city": {"type": "string"}}}),)
Env = ChainedEnv


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    def adapter(base_url: str) -> OpenAIResponsesAdapter:
        return OpenAIResponsesAdapter(base_url=base_url, api_key="test-key")

    async with chained_env(OpenAIResponsesEmulator(), adapter,
                           defaults=cursor_defaults(GPT5, TOOLS),
                           auth=lambda key: {"Authorization": f"Bearer {key}"}) as rig:
        yield rig


def results_for(response: ProviderResponse, output: str = "sunny") -> tuple[ToolResultPart, ...]:
    return tuple(ToolResultPart(call_id=c.call_id, name=c.name, output=f"{output}-{i}")
                 for i, c in enumerate(response.tool_calls))


# --- chains and what a cursor stands for ---------------------------------------------


async def test_cursor_conversations_equal_the_committed_history(env: Env) -> None:
    """Replay, tool loop by cursor, cursor turn, expiry and replay: after every turn the
    newest cursor stands for exactly the committed history."""
    history: list[Message] = []
    first, _ = await env.run(env.call(strategy=Strategy.REPLAY,
                                      user_text="Weather? [[call:weather]] [[think]]"))
    results = results_for(first)
    second, _ = await env.run(env.call(cursor=first.response_id, tool_results=results,
                                       iteration=1))
    history += [message(1, Role.USER, TextPart(text="Weather? [[call:weather]] [[think]]")),
                message(2, Role.ASSISTANT, *first.parts, *results, *second.parts)]
    assert second.response_id is not None
    assert env.emulator.conversation_for(second.response_id) == items_from_messages(history)

    third, _ = await env.run(env.call(cursor=second.response_id, user_text="Thanks!"))
    history += [message(3, Role.USER, TextPart(text="Thanks!")),
                message(4, Role.ASSISTANT, *third.parts)]
    assert third.response_id is not None
    assert env.emulator.conversation_for(third.response_id) == items_from_messages(history)

    env.emulator.expire(third.response_id)
    with pytest.raises(CursorRejected) as caught:
        await env.run(env.call(cursor=third.response_id, user_text="Again"))
    assert caught.value.reason == "cursor_expired"
    fourth, _ = await env.run(env.call(strategy=Strategy.REPLAY, history=tuple(history),
                                       user_text="Again"))
    history += [message(5, Role.USER, TextPart(text="Again")),
                message(6, Role.ASSISTANT, *fourth.parts)]
    assert fourth.response_id is not None
    assert env.emulator.conversation_for(fourth.response_id) == items_from_messages(history)
    replayed = env.emulator.requests[-1].json
    assert "previous_response_id" not in replayed
    assert all("id" not in item for item in replayed["input"])


async def test_parallel_calls_and_several_rounds(env: Env) -> None:
    """``[[call:weather*2]] [[rounds:2]]``: two calls per round, two rounds, then text."""
    response, _ = await env.run(env.call(strategy=Strategy.REPLAY,
                                         user_text="[[call:weather*2]] [[rounds:2]]"))
    assert len(response.tool_calls) == 2 and response.finish_reason == "tool_calls"
    response, _ = await env.run(env.call(cursor=response.response_id,
                                         tool_results=results_for(response), iteration=1))
    assert len(response.tool_calls) == 2
    response, _ = await env.run(env.call(cursor=response.response_id,
                                         tool_results=results_for(response, "rain"),
                                         iteration=2))
    assert response.tool_calls == () and response.finish_reason == "stop"
    assert "weather=rain-0" in response.parts[-1].text  # type: ignore[union-attr]


async def test_scripted_replies_and_streamed_deltas(env: Env) -> None:
    """A pushed reply streams as several word deltas with its reasoning first."""
    env.emulator.model.push(Reply(text="One two three four.", reasoning="Hmm, let me see."))
    response, deltas = await env.run(env.call(strategy=Strategy.REPLAY, user_text="go"))
    texts = [d.text for d in deltas if type(d).__name__ == "TextDelta"]
    assert texts == ["One", " two", " three", " four."]
    reasoning = response.parts[0]
    assert isinstance(reasoning, ReasoningPart) and reasoning.text == "Hmm, let me see."
    assert reasoning.data is None  # no include: no encrypted content
    assert response.parts[1] == TextPart(text="One two three four.")


async def test_ids_look_like_the_real_ones(env: Env) -> None:
    """resp_, rs_, msg_, fc_ and call_ prefixes."""
    env.emulator.model.push(Reply(text="t", reasoning="r",
                                  calls=(ScriptedCall(name="weather", arguments="{}"),)))
    status, body = await env.post({"model": "gpt-5", "input": "hi", "tools": [
        {"type": "function", "name": "weather", "parameters": {}}]})
    assert status == 200 and re.fullmatch(r"resp_[0-9a-f]{8}\d{6}", body["id"])
    kinds = {item["type"]: item for item in body["output"]}
    assert kinds["reasoning"]["id"].startswith("rs_")
    assert kinds["message"]["id"].startswith("msg_")
    assert kinds["function_call"]["id"].startswith("fc_")
    assert kinds["function_call"]["call_id"].startswith("call_")


async def test_reasoning_only_for_reasoning_models_or_requests(env: Env) -> None:
    """gpt-4o does not think unless the request asks for reasoning."""
    response, _ = await env.run(env.call(model=GPT4O, strategy=Strategy.REPLAY,
                                         user_text="[[think]] hi"))
    assert not any(isinstance(p, ReasoningPart) for p in response.parts)
    adapter = attrs.evolve(env.adapter, reasoning={"effort": "low"})
    response, _ = await env.run(env.call(model=GPT4O, strategy=Strategy.REPLAY,
                                         user_text="[[think]] hi"), adapter)
    assert isinstance(response.parts[0], ReasoningPart)


async def test_encrypted_reasoning_round_trips_through_replay(env: Env) -> None:
    """With include, reasoning carries encrypted content, and replaying it is accepted."""
    adapter = attrs.evolve(env.adapter, include_encrypted_reasoning=True)
    first, _ = await env.run(env.call(strategy=Strategy.REPLAY, user_text="[[think]] q"),
                             adapter)
    reasoning = first.parts[0]
    assert isinstance(reasoning, ReasoningPart) and reasoning.data
    history = (message(1, Role.USER, TextPart(text="[[think]] q")),
               message(2, Role.ASSISTANT, *first.parts))
    await env.run(env.call(strategy=Strategy.REPLAY, history=history, user_text="next"),
                  adapter)
    sent = env.emulator.requests[-1].json["input"]
    assert sent[1] == {"type": "reasoning", "id": reasoning.signature, "summary": [
        {"type": "summary_text", "text": reasoning.text}], "encrypted_content": reasoning.data}
    assert (reasoning.signature or "").startswith("rs_")


# --- the real rules ------------------------------------------------------------------


async def test_unknown_cursor_gives_the_real_error(env: Env) -> None:
    """A well-formed id that was never stored: 400 previous_response_not_found."""
    status, body = await env.post({"model": "gpt-5", "input": "hi",
                                   "previous_response_id": "resp_999999"})
    assert status == 400
    assert body == {"error": {"message": "Previous response with id 'resp_999999' not found.",
                              "type": "invalid_request_error",
                              "param": "previous_response_id",
                              "code": "previous_response_not_found"}}
    with pytest.raises(CursorRejected) as caught:
        await env.run(env.call(cursor="resp_999999", user_text="hi"))
    assert caught.value.reason == "cursor_expired" and caught.value.status == 400


async def test_malformed_cursor_is_invalid(env: Env) -> None:
    """An id that does not begin with resp is refused as invalid."""
    status, body = await env.post({"model": "gpt-5", "input": "hi",
                                   "previous_response_id": "chatcmpl-1"})
    assert status == 400 and body["error"]["code"] == "invalid_value"
    assert body["error"]["param"] == "previous_response_id"
    with pytest.raises(CursorRejected) as caught:
        await env.run(env.call(cursor="not-a-cursor", user_text="hi"))
    assert caught.value.reason == "cursor_invalid"


async def test_evict_all_and_conversation_lookup(env: Env) -> None:
    """Eviction rejects every cursor; conversations stay inspectable; unknown ids raise."""
    first, _ = await env.run(env.call(strategy=Strategy.REPLAY, user_text="a"))
    second, _ = await env.run(env.call(cursor=first.response_id, user_text="b"))
    assert first.response_id is not None and second.response_id is not None
    env.emulator.evict_all()
    assert not env.emulator.stored(first.response_id)
    for cursor in (first.response_id, second.response_id):
        with pytest.raises(CursorRejected):
            await env.run(env.call(cursor=cursor, user_text="c"))
    assert len(env.emulator.conversation_for(second.response_id)) == 4
    with pytest.raises(KeyError):
        env.emulator.conversation_for("resp_424242")


async def test_store_false_is_not_stored(env: Env) -> None:
    """A store:false response has an id that cannot be chained on, nor its items used."""
    status, body = await env.post({"model": "gpt-5", "input": "hi", "store": False})
    assert status == 200 and body["store"] is False
    assert not env.emulator.stored(body["id"])
    status, error = await env.post({"model": "gpt-5", "input": "again",
                                    "previous_response_id": body["id"]})
    assert status == 400 and error["error"]["code"] == "previous_response_not_found"
    item = body["output"][0]
    status, error = await env.post({"model": "gpt-5", "input": [item]})
    assert status == 404
    assert error["error"]["message"].startswith(f"Item with id '{item['id']}' not found.")


async def test_call_without_output_is_refused(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """Chaining a new user message on pending calls: "No tool output found ..."."""
    first, _ = await env.run(env.call(strategy=Strategy.REPLAY, user_text="[[call:weather]]"))
    call_id = first.tool_calls[0].call_id
    with caplog.at_level(logging.ERROR, logger="turnstate"), \
            pytest.raises(FatalProviderError) as caught:
        await env.run(env.call(cursor=first.response_id, user_text="never mind"))
    assert caught.value.detail == f"No tool output found for function call {call_id}."
    assert caught.value.status == 400 and "No tool output found" in caplog.text


async def test_replayed_call_without_output_is_refused(env: Env) -> None:
    """The same rule holds for a replayed history."""
    history = (message(1, Role.USER, TextPart(text="q")), message(2, Role.ASSISTANT, ToolCallPart(
        call_id="call_lost", name="weather", arguments="{}")))
    with pytest.raises(FatalProviderError, match="No tool output found for function call "
                                                 "call_lost"):
        await env.run(env.call(strategy=Strategy.REPLAY, history=history, user_text="n"))


async def test_output_without_call_is_refused(env: Env) -> None:
    """A function_call_output whose call is unknown: "No tool call found ..."."""
    first, _ = await env.run(env.call(strategy=Strategy.REPLAY, user_text="hello"))
    orphan = (ToolResultPart(call_id="call_nope", name="weather", output="x"),)
    with pytest.raises(FatalProviderError) as caught:
        await env.run(env.call(cursor=first.response_id, tool_results=orphan, iteration=1))
    assert caught.value.detail == ("No tool call found for function call output with call_id "
                                   "call_nope.")


async def test_request_shape_is_validated(env: Env) -> None:
    """Missing model, nested (Chat Completions) tools, unknown item types, bad JSON, no key."""
    status, body = await env.post({"input": "hi"})
    assert status == 400 and body["error"]["code"] == "missing_required_parameter"
    status, body = await env.post({"model": "gpt-5", "input": "hi", "tools": [
        {"type": "function", "function": {"name": "weather"}}]})
    assert status == 400 and body["error"]["param"] == "tools[0].name"
    status, body = await env.post({"model": "gpt-5", "input": [{"type": "bogus"}]})
    assert status == 400 and body["error"]["param"] == "input[0].type"
    status, body = await env.post({"model": "gpt-5", "input": "hi", "context_management": {
        "type": "compaction"}})
    assert status == 400 and body["error"]["code"] == "invalid_type"
    async with env.session.post(env.url, data=b"{not json",
                                headers={"Authorization": "Bearer k"}) as response:
        assert response.status == 400
    status, body = await env.post({"model": "gpt-5", "input": "hi"}, key=None)
    assert status == 401 and "didn't provide an API key" in body["error"]["message"]
    with pytest.raises(FatalProviderError) as caught:
        await env.run(env.call(user_text="x"), attrs.evolve(env.adapter, api_key=""))
    assert caught.value.status == 401


async def test_retrieve_and_delete(env: Env) -> None:
    """GET returns the stored response; DELETE forgets it like an expiry."""
    first, _ = await env.run(env.call(strategy=Strategy.REPLAY, user_text="a"))
    url = f"{env.url}/{first.response_id}"
    async with env.session.get(url) as response:
        assert response.status == 200 and (await response.json())["id"] == first.response_id
    async with env.session.delete(url) as response:
        assert (await response.json())["deleted"] is True
    async with env.session.get(url) as response:
        assert response.status == 404


async def test_non_streaming_body_parses(env: Env) -> None:
    """stream false returns the JSON response the codec's body parser understands."""
    env.emulator.model.push(Reply(text="plain"))
    status, body = await env.post({"model": "gpt-5", "input": "hi"})
    assert status == 200 and body["status"] == "completed"
    response = parse_response_body(body)
    assert response.parts == (TextPart(text="plain"),)
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0


# --- compaction and usage ------------------------------------------------------------


async def test_compaction_above_the_threshold(env: Env) -> None:
    """A low compact_threshold makes the server compact; the next chained request then
    reports a small context."""
    settings = ContextSettings(compact_threshold=60)
    first, _ = await env.run(env.call(strategy=Strategy.REPLAY, settings=settings,
                                      user_text="word " * 80))
    assert first.metadata["compacted"] is True
    compaction_id = first.metadata["compactionItemIds"][0]
    assert compaction_id.startswith("cmp_")
    assert first.response_id is not None
    assert env.emulator.responses[first.response_id].compacted
    second, _ = await env.run(env.call(cursor=first.response_id, settings=settings,
                                       user_text="more"))
    assert second.usage.input_tokens < first.usage.input_tokens
    assert len(env.emulator.conversation_for(second.response_id or "")) == 4


async def test_no_compaction_when_disabled(env: Env) -> None:
    """Disabled compaction sends no context_management and nothing is compacted."""
    settings = ContextSettings(provider_compaction_enabled=False)
    first, _ = await env.run(env.call(strategy=Strategy.REPLAY, settings=settings,
                                      user_text="word " * 80))
    assert first.metadata == {}
    assert "context_management" not in env.emulator.requests[-1].json
    assert first.response_id is not None
    assert not env.emulator.responses[first.response_id].compacted


async def test_usage_counts_the_chained_prefix_as_cached(env: Env) -> None:
    """A chained call sees the whole conversation; its prefix is cached from 1,024
    tokens on, in steps of 128 (OpenAI's automatic prompt caching)."""
    first, _ = await env.run(env.call(strategy=Strategy.REPLAY, user_text="a" * 8000))
    second, _ = await env.run(env.call(cursor=first.response_id, user_text="b"))
    assert first.usage.cached_input_tokens == 0
    assert second.usage.input_tokens > first.usage.input_tokens
    cached = second.usage.cached_input_tokens
    assert cached >= 1024 and (cached - 1024) % 128 == 0
    assert first.usage.input_tokens - 128 <= cached <= second.usage.input_tokens


async def test_a_short_prefix_is_never_cached(env: Env) -> None:
    first, _ = await env.run(env.call(strategy=Strategy.REPLAY, user_text="a" * 400))
    second, _ = await env.run(env.call(cursor=first.response_id, user_text="b"))
    assert second.usage.cached_input_tokens == 0


# --- faults and the request log ------------------------------------------------------


async def test_status_fault_is_retried_by_the_transport(env: Env) -> None:
    """A queued 500 fails the first attempt; the retry succeeds."""
    env.emulator.faults.push(Fault(status=500, body={"error": {
        "message": "The server had an error", "type": "server_error"}}))
    response, _ = await env.run(env.call(strategy=Strategy.REPLAY, user_text="hi"))
    assert response.finish_reason == "stop"
    assert len(env.emulator.requests) == 2 and len(env.sleeps.delays) == 1


async def test_rate_limit_fault_honours_retry_after(env: Env) -> None:
    """A 429 with Retry-After is waited out for exactly that long."""
    env.emulator.faults.push(Fault.rate_limited(retry_after=2))
    await env.run(env.call(strategy=Strategy.REPLAY, user_text="hi"))
    assert env.sleeps.delays == [2.0]


async def test_cut_stream_is_transient_and_not_retried(env: Env) -> None:
    """A stream cut after some events fails without a retry."""
    env.emulator.faults.push(Fault(cut_after=4))
    with pytest.raises(TransientProviderError):
        await env.run(env.call(strategy=Strategy.REPLAY, user_text="one two three"))
    assert len(env.emulator.requests) == 1 and env.sleeps.delays == []


async def test_malformed_frame_is_a_protocol_error(env: Env) -> None:
    """A frame whose data is not JSON fails the call cleanly."""
    env.emulator.faults.push(Fault(malformed_after=2))
    with pytest.raises(ProviderProtocolError, match="malformed frame"):
        await env.run(env.call(strategy=Strategy.REPLAY, user_text="hi"))


async def test_fault_for_another_path_does_not_apply(env: Env) -> None:
    """``path_contains`` restricts a fault to matching requests."""
    env.emulator.faults.push(Fault(status=500, path_contains="/compact"))
    await env.run(env.call(strategy=Strategy.REPLAY, user_text="hi"))
    assert len(env.emulator.requests) == 1 and len(env.emulator.faults) == 1


async def test_request_log_holds_the_sent_bodies_with_the_key_redacted(env: Env) -> None:
    """Every request is logged as sent, the Authorization header redacted."""
    call = env.call(strategy=Strategy.REPLAY, user_text="hi")
    await env.run(call)
    recorded = env.emulator.requests[0]
    assert recorded.body == env.adapter.build_request(call).body
    assert recorded.path == "/v1/responses" and recorded.method == "POST"
    assert recorded.headers["authorization"] == "<redacted>"
    assert "test-key" not in repr(recorded)

