"""Chat Completions request building: replay rendering, the local loop, tools, envelopes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import attrs
from hypothesis import given
from hypothesis import strategies as st

from tests.providers.support import message as msg
from tests.providers.support import request_json
from tests.strategies import wire_part_lists
from turnstate.core._conversation import (
    Message,
    Part,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    TransitionPart,
)
from turnstate.core._decisions import Strategy, TurnContext
from turnstate.core._envelope import Mode
from turnstate.core._json import compact_json
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers._protocol import ProviderCall, ProviderResponse
from turnstate.providers.chat_completions import (
    ChatCompletionsAdapter,
    ReasoningPolicy,
    render_parts,
    render_tools,
)
from turnstate.providers.chat_completions._codec import render_parts_json
from turnstate.providers.deepseek import DeepSeekAdapter

NOW = datetime(2026, 1, 1, tzinfo=UTC)
MODEL = DEFAULT_REGISTRY.model("openai-compatible", "gpt-4o")
WEATHER = ToolSpec(name="weather", description="Weather for a city.",
                   parameters={"type": "object", "required": ["city"],
                               "properties": {"city": {"type": "string"}}})
CLOCK = ToolSpec(name="clock", parameters={"type": "object", "properties": {}})


def make_call(*history: Message, **changes: Any) -> ProviderCall:
    fields: dict[str, Any] = {"strategy": Strategy.LOCAL_LOOP, "model": MODEL,
                              "system_prompt": "Be brief.", "tools": (WEATHER,),
                              "history": history, "user_text": "next?"}
    fields.update(changes)
    return ProviderCall(**fields)


def body(call: ProviderCall, adapter: ChatCompletionsAdapter | None = None) -> dict[str, Any]:
    decoded: dict[str, Any] = request_json(adapter or ChatCompletionsAdapter(), call)
    return decoded


def call_part(call_id: str, city: str = "Paris") -> ToolCallPart:
    return ToolCallPart(call_id=call_id, name="weather", arguments=json.dumps({"city": city}),
                        provider="openai-compatible", model="gpt-4o")


def test_request_shape_and_headers() -> None:
    """POST {base}/chat/completions, Bearer auth, compact JSON that asks for a stream."""
    adapter = ChatCompletionsAdapter(base_url="http://127.0.0.1:9/v1/", api_key="sk-test")
    request = adapter.build_request(make_call())
    assert (request.method, request.url) == ("POST", "http://127.0.0.1:9/v1/chat/completions")
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "text/event-stream"
    assert b": " not in request.body and b", " not in request.body
    payload = json.loads(request.body)
    assert payload["model"] == "gpt-4o"
    assert payload["stream"] is True
    assert payload["stream_options"] == {"include_usage": True}
    assert adapter.provider == "openai-compatible"


def test_api_key_stays_out_of_reprs_and_bodies() -> None:
    """The key is only in the auth header; no key means no header."""
    adapter = ChatCompletionsAdapter(api_key="sk-secret-value")
    request = adapter.build_request(make_call())
    assert "sk-secret-value" not in repr(adapter) + repr(request)
    assert b"sk-secret-value" not in request.body
    assert "authorization" not in ChatCompletionsAdapter().build_request(make_call()).headers
    assert ChatCompletionsAdapter().url == "https://api.openai.com/v1/chat/completions"


def test_system_history_and_user_in_order() -> None:
    """System first, then the history's user and assistant messages, then the new user text."""
    history = (msg(1, Role.USER, TextPart(text="hi "), TextPart(text="there")),
               msg(2, Role.ASSISTANT, TextPart(text="Hello!")))
    assert body(make_call(*history))["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi there"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "next?"},
    ]


def test_empty_system_prompt_is_left_out() -> None:
    """With no system prompt the first message is the user's."""
    assert body(make_call(system_prompt=""))["messages"] == [{"role": "user", "content": "next?"}]


def test_assistant_parts_split_at_tool_result_boundaries() -> None:
    """[text, A, B, result A, result B, text] → assistant(text + A, B), tool A, tool B, text."""
    parts = (TextPart(text="Checking."), call_part("call_A"), call_part("call_B", "Rome"),
             ToolResultPart(call_id="call_A", name="weather", output="sunny"),
             ToolResultPart(call_id="call_B", name="weather", output="rain", is_error=True),
             TextPart(text="Paris is sunny."))
    messages = body(make_call(msg(1, Role.USER, TextPart(text="q")),
                              msg(2, Role.ASSISTANT, *parts)))["messages"]
    assert messages[2:5] == [
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "call_A", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
            {"id": "call_B", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Rome"}'}}]},
        {"role": "tool", "tool_call_id": "call_A", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_B", "content": "rain"},
    ]
    assert messages[5] == {"role": "assistant", "content": "Paris is sunny."}


def test_rounds_of_tools_become_separate_assistant_messages() -> None:
    """Two tool rounds in one stored message render as two call/result pairs, then text."""
    parts = (call_part("c1"), ToolResultPart(call_id="c1", name="weather", output="a"),
             call_part("c2"), ToolResultPart(call_id="c2", name="weather", output="b"),
             TextPart(text="done"))
    messages = body(make_call(msg(1, Role.USER, TextPart(text="q")),
                              msg(2, Role.ASSISTANT, *parts)))["messages"][2:-1]
    assert [(m["role"], m.get("content")) for m in messages] == [
        ("assistant", None), ("tool", "a"), ("assistant", None), ("tool", "b"),
        ("assistant", "done")]


def test_reasoning_and_transitions_are_never_sent() -> None:
    """Plain Chat Completions drops reasoning, transition parts and reasoning-only segments."""
    parts = (ReasoningPart(provider="openai-compatible", model="gpt-4o",
                           kind="reasoning_content", text="hmm"),
             TransitionPart(reason="provider_changed", strategy="local_loop",
                            source_state="validate"),
             TextPart(text="answer"))
    messages = body(make_call(msg(1, Role.USER, TextPart(text="q")),
                              msg(2, Role.ASSISTANT, *parts),
                              msg(3, Role.USER, TextPart(text="q2")),
                              msg(4, Role.ASSISTANT, parts[0])))["messages"]
    assert messages[2] == {"role": "assistant", "content": "answer"}
    assert messages[3] == {"role": "user", "content": "q2"}
    assert "reasoning_content" not in json.dumps(messages)


def test_tools_sorted_with_canonical_schemas() -> None:
    """Tools render by name with sorted schema keys; an empty description is left out."""
    tools = render_tools([WEATHER, CLOCK])
    assert tools == [
        {"type": "function", "function": {"name": "clock",
                                          "parameters": {"properties": {}, "type": "object"}}},
        {"type": "function", "function": {
            "name": "weather", "description": "Weather for a city.",
            "parameters": {"properties": {"city": {"type": "string"}}, "required": ["city"],
                           "type": "object"}}},
    ]
    assert list(tools[1]["function"]["parameters"]) == ["properties", "required", "type"]


def test_request_bytes_do_not_depend_on_tool_order() -> None:
    """Listing the tools in another order (or schema keys in another order) changes no byte."""
    shuffled = ToolSpec(name="weather", description=WEATHER.description,
                        parameters={"properties": {"city": {"type": "string"}},
                                    "type": "object", "required": ["city"]})
    adapter = ChatCompletionsAdapter()
    one = adapter.build_request(make_call(tools=(WEATHER, CLOCK))).body
    two = adapter.build_request(make_call(tools=(CLOCK, shuffled))).body
    assert one == two


def test_no_tools_means_no_tools_field() -> None:
    """A call without tools sends no ``tools`` key."""
    assert "tools" not in body(make_call(tools=()))


def test_extend_loop_appends_assistant_calls_and_results() -> None:
    """The loop grows by this response's assistant message and its tool results."""
    adapter = ChatCompletionsAdapter()
    call = make_call()
    response = ProviderResponse(response_id="r1", parts=(call_part("c1"),),
                                finish_reason="tool_calls")
    results = [ToolResultPart(call_id="c1", name="weather", output="sunny")]
    loop = adapter.extend_loop(call, response, results)
    assert loop == (
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    )
    second = attrs.evolve(call, loop_messages=loop, iteration=1)
    assert body(second, adapter)["messages"][-3:] == [{"role": "user", "content": "next?"},
                                                      *loop]
    more = adapter.extend_loop(second, response, results)
    assert more[:2] == loop and len(more) == 4


def test_loop_bytes_equal_the_history_rendering_of_the_committed_turn() -> None:
    """A turn's last request is a byte prefix of the next turn's request."""
    adapter = ChatCompletionsAdapter()
    first = make_call(user_text="weather?")
    response = ProviderResponse(response_id="r1", parts=(TextPart(text="Let me look."),
                                                         call_part("c1")))
    results = [ToolResultPart(call_id="c1", name="weather", output="sunny")]
    last = attrs.evolve(first, loop_messages=adapter.extend_loop(first, response, results))
    committed = (msg(1, Role.USER, TextPart(text="weather?")),
                 msg(2, Role.ASSISTANT, *response.parts, *results, TextPart(text="Sunny.")))
    following = make_call(*committed, user_text="thanks")
    before = [json.dumps(m) for m in body(last, adapter)["messages"]]
    after = [json.dumps(m) for m in body(following, adapter)["messages"]]
    assert after[:len(before)] == before


def test_identical_calls_give_identical_bytes() -> None:
    """Rendering is deterministic."""
    history = (msg(1, Role.USER, TextPart(text="q")),
               msg(2, Role.ASSISTANT, call_part("c1"),
                   ToolResultPart(call_id="c1", name="weather", output="x"), TextPart(text="y")))
    adapter = ChatCompletionsAdapter()
    assert adapter.build_request(make_call(*history)).body == \
        adapter.build_request(make_call(*history)).body


def test_cursor_and_tool_results_are_ignored_by_a_stateless_call() -> None:
    """A stateless provider sends no cursor and takes results from the loop only."""
    call = make_call(cursor="resp_x", tool_results=(
        ToolResultPart(call_id="c9", name="weather", output="z"),))
    payload = body(call)
    assert "resp_x" not in json.dumps(payload) and "c9" not in json.dumps(payload)


def test_envelope_is_a_stateless_loop_carrying_the_loop() -> None:
    """The envelope has mode stateless-loop, no cursor, and the loop messages."""
    ctx = TurnContext(provider="openai-compatible", model_name="gpt-4o",
                      system_prompt_hash="s", toolset_hash="t", committed_seq=3)
    response = ProviderResponse(response_id="chatcmpl-1", parts=())
    loop = ({"role": "tool", "tool_call_id": "c", "content": "x"},)
    envelope = ChatCompletionsAdapter().envelope(ctx, response, loop_messages=loop, now=NOW,
                                                 covers_seq=4)
    assert envelope.mode is Mode.STATELESS_LOOP
    assert envelope.cursor is None and envelope.loop_messages == loop
    assert (envelope.provider, envelope.model_name, envelope.covers_seq) == (
        "openai-compatible", "gpt-4o", 4)


def parts_of(specs: list[tuple[Any, ...]]) -> tuple[Part, ...]:
    """Parts from the plain tuples of ``tests.strategies.wire_part_lists``."""
    out: list[Part] = []
    for spec in specs:
        if spec[0] == "text":
            out.append(TextPart(text=spec[1]))
        elif spec[0] == "call":
            out.append(ToolCallPart(call_id=spec[1], name=spec[2], arguments=spec[3],
                                    provider="deepseek", model="deepseek-v4-flash"))
        elif spec[0] == "result":
            out.append(ToolResultPart(call_id=spec[1], name="t", output=spec[2],
                                      is_error=spec[3]))
        else:
            out.append(ReasoningPart(provider=spec[1], model=spec[2], kind=spec[3],
                                     text=spec[4], signature=spec[5], data=spec[6]))
    return tuple(out)


@given(specs=wire_part_lists, rule=st.sampled_from([None, "always", "calls"]))
def test_rendered_fragments_are_exactly_compact_json(
    specs: list[tuple[Any, ...]], rule: str | None
) -> None:
    """Each hand-written fragment is what ``compact_json`` writes for its parsed form."""
    rules = {"always": lambda text, calls: text, "calls": lambda text, calls: text if calls
             else ""}
    policy = ReasoningPolicy(rule=rules.get(rule or ""), provider="deepseek",
                             model="deepseek-v4-flash")
    fragments = render_parts_json(parts_of(specs), policy)
    assert [compact_json(json.loads(f)) for f in fragments] == fragments
    assert render_parts(parts_of(specs), policy) == [json.loads(f) for f in fragments]


@given(specs=wire_part_lists, user=st.text(max_size=10),
       model=st.sampled_from(["deepseek-chat", "deepseek-reasoner", "deepseek-v4-flash"]))
def test_request_body_is_exactly_compact_json(
    specs: list[tuple[Any, ...]], user: str, model: str
) -> None:
    """The assembled body equals ``compact_json`` of the payload it decodes to."""
    history = (msg(1, Role.USER, TextPart(text=user)), msg(2, Role.ASSISTANT, *parts_of(specs)))
    for adapter, info in ((ChatCompletionsAdapter(), MODEL),
                          (DeepSeekAdapter(), DEFAULT_REGISTRY.model("deepseek", model))):
        body = adapter.build_request(make_call(*history, model=info, user_text=user)).body
        assert compact_json(json.loads(body)).encode("utf-8") == body
