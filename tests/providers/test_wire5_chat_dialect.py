"""OpenAI-compatible servers that refuse ``max_completion_tokens`` or ``stream_options``
(providers-wire.md section 3.2: both are OpenAI's fields; ``_dialect`` names the
servers): a dialect given, or the refusal learnt, one retry, remembered per URL."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.engine.support import collect, make_turn
from tests.providers.test_chat_completions_codec import make_call
from turnstate.core._events import TurnCompleted
from turnstate.core._generation import GenerationSettings
from turnstate.emulators import EmulatedProviders
from turnstate.emulators._chat_dialects import STRICT_LEGACY
from turnstate.engine import TurnEngine
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.providers.chat_completions import ChatCompletionsAdapter
from turnstate.providers.chat_completions._dialect import (
    LEGACY_DIALECT,
    REFUSALS,
    FieldRefused,
    amended_body,
)
from turnstate.storage import MemoryStore, decode_audit

VLLM = {"object": "error", "message": "[{'type': 'extra_forbidden', 'loc': ('body', "
        "'stream_options'), 'msg': 'Extra inputs are not permitted', 'input': "
        "{'include_usage': True}}]", "type": "BadRequestError", "param": None, "code": 400}
MISTRAL = {"object": "error", "message": {"detail": [{"type": "extra_forbidden", "loc": [
    "body", "max_completion_tokens"], "msg": "Extra inputs are not permitted", "input": 64}]},
    "type": "invalid_request_error", "param": None, "code": None}
AZURE = {"error": {"message": "Unrecognized request argument supplied: stream_options",
                   "type": "invalid_request_error", "param": None, "code": None}}
TGI = {"error": "Failed to deserialize the JSON body into the target type: unknown field "
       "`max_completion_tokens`, expected one of `model`, `messages`", "error_type":
       "validation"}
O1 = {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this "
                "model. Use 'max_completion_tokens' instead.", "type": "invalid_request_error",
                "param": "max_tokens", "code": "unsupported_parameter"}}
TOO_LARGE = {"error": {"message": "max_tokens is too large: 100000. This model supports at "
                       "most 16384 completion tokens, whereas you provided 100000.",
                       "type": "invalid_request_error", "param": "max_tokens", "code": None}}


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    REFUSALS.clear()
    yield
    REFUSALS.clear()


def _classify(status: int, body: dict[str, Any]) -> Any:
    adapter = ChatCompletionsAdapter(base_url="http://vllm.test/v1")
    return adapter.classify_error(status, {}, json.dumps(body).encode())


@pytest.mark.parametrize(("status", "body", "field"), [
    (400, VLLM, "stream_options"), (422, MISTRAL, "max_completion_tokens"),
    (400, AZURE, "stream_options"), (422, TGI, "max_completion_tokens"),
    (400, O1, "max_tokens")])
def test_a_refused_optional_field_is_named(status: int, body: dict[str, Any],
                                           field: str) -> None:
    error = _classify(status, body)
    assert isinstance(error, FieldRefused) and error.field == field
    assert error.status == status and not error.retryable


def test_a_refused_value_is_not_a_refused_field() -> None:
    error = _classify(400, TOO_LARGE)
    assert not isinstance(error, FieldRefused) and "too large" in error.detail
    assert not isinstance(_classify(500, AZURE), FieldRefused)


def test_the_amended_body_renames_the_limit_in_place_and_drops_stream_options() -> None:
    body = b'{"model":"m","messages":[],"max_completion_tokens":64,"stream":true,' \
           b'"stream_options":{"include_usage":true}}'
    renamed = amended_body(body, "max_completion_tokens", frozenset())
    assert renamed == (b'{"model":"m","messages":[],"max_tokens":64,"stream":true,'
                       b'"stream_options":{"include_usage":true}}')
    assert amended_body(body, "stream_options", frozenset()) == (
        b'{"model":"m","messages":[],"max_completion_tokens":64,"stream":true}')
    assert amended_body(body, "max_completion_tokens", frozenset({"max_tokens"})) is None
    assert amended_body(b'{"model":"m"}', "stream_options", frozenset()) is None


def test_a_legacy_dialect_sends_max_tokens_and_no_stream_options() -> None:
    adapter = ChatCompletionsAdapter(base_url="http://llama.test/v1", dialect=LEGACY_DIALECT)
    call = make_call(generation=GenerationSettings(max_output_tokens=64))
    body = json.loads(adapter.build_request(call).body)
    assert body["max_tokens"] == 64 and "max_completion_tokens" not in body
    assert "stream_options" not in body and body["stream"] is True


@pytest.fixture
async def strict() -> AsyncIterator[tuple[Any, TurnEngine, MemoryStore, str]]:
    async with EmulatedProviders(["openai-compatible"]) as stack, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport:
        emulator = stack.emulators["openai-compatible"]
        emulator.dialects["gpt-4o-mini"] = STRICT_LEGACY
        store = MemoryStore()
        chat = await store.create_chat(owner="o")
        yield emulator, TurnEngine(store, stack.adapters, transport), store, chat.id


async def test_a_server_refusing_both_fields_is_learnt_and_the_turn_completes(
    strict: tuple[Any, TurnEngine, MemoryStore, str],
) -> None:
    emulator, engine, store, chat_id = strict
    settings = GenerationSettings(max_output_tokens=64)
    outcome = await collect(engine.run_turn(chat_id, make_turn(
        "hello", provider="openai-compatible", model="gpt-4o-mini", settings=settings)))
    final = outcome.final
    assert isinstance(final, TurnCompleted), final
    sent = [r.json for r in emulator.requests]
    assert len(sent) == 3 and final.stats.requests == 1 and final.stats.retries == 2
    assert "max_tokens" in sent[-1] and "max_completion_tokens" not in sent[-1]
    assert "stream_options" not in sent[-1]
    assert final.stats.cost is None  # no usage chunk: unknown, never $0
    audit = decode_audit((await store.load_history(chat_id))[-1].provider_state).metadata
    assert audit is not None and audit["usageMissing"] is True
    assert audit["serverRefusedFields"] == ["max_completion_tokens", "stream_options"]
    again = await collect(engine.run_turn(chat_id, make_turn(
        "more", provider="openai-compatible", model="gpt-4o-mini", settings=settings)))
    assert isinstance(again.final, TurnCompleted)
    assert len(emulator.requests) == 4  # remembered: sent once, without them


def test_the_server_takes_the_dialect_from_its_environment() -> None:
    from turnstate.core._errors import ConfigurationError
    from turnstate.server._providers import live_adapters
    adapters = live_adapters({"OPENAI_COMPATIBLE_BASE_URL": "http://llama.test/v1",
                              "OPENAI_COMPATIBLE_DIALECT": "legacy"})
    assert adapters["openai-compatible"].dialect == LEGACY_DIALECT  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError):
        live_adapters({"OPENAI_COMPATIBLE_BASE_URL": "http://x.test/v1",
                       "OPENAI_COMPATIBLE_DIALECT": "vllm"})
