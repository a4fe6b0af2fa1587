"""A 2xx answer that is not the event stream asked for (a gateway's JSON error, a
non-streamed completion) against real servers on 127.0.0.1: read and classified like a
non-2xx body, per provider family, or failed as a protocol error naming its type."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web

from tests.providers.support import Sleeps
from tests.providers.test_transport import SECRET, Flaky, request_for, serve, transport_with
from turnstate.core._errors import (
    FatalProviderError,
    ProviderError,
    ProviderProtocolError,
    RateLimited,
    TransientProviderError,
)
from turnstate.providers import (
    AnthropicAdapter,
    ChatCompletionsAdapter,
    DeepSeekAdapter,
    GeminiInteractionsAdapter,
    OpenAIResponsesAdapter,
    ProviderAdapter,
    SseEvent,
)
from turnstate.providers._protocol import ErrorClassifier
from turnstate.providers._transport import AiohttpTransport

COMPLETION = json.dumps({  # a non-streamed Chat Completions answer (providers-wire.md)
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": "Galaxy Day is on Saturday."}}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}})


def json_200(body: Any, content_type: str = "application/json") -> Callable[[], web.Response]:
    text = body if isinstance(body, str) else json.dumps(body)
    return lambda: web.Response(status=200, text=text, headers={"Content-Type": content_type})


async def stream(transport: AiohttpTransport, url: Any, classify: ErrorClassifier,
                 ) -> list[SseEvent]:
    return [event async for event in transport.stream(request_for(url), classify)]


# Each family's own error shape, sent with HTTP 200 and classified by its code or type.
FAMILIES: list[tuple[str, Callable[[], ProviderAdapter], Any, type[ProviderError], str]] = [
    ("chat-rate", lambda: ChatCompletionsAdapter(api_key="k"),
     {"error": {"message": "Rate limit reached for requests", "type": "requests",
                "code": "rate_limit_exceeded"}}, RateLimited, "Rate limit reached"),
    ("deepseek-busy", lambda: DeepSeekAdapter(api_key="k"),
     {"error": {"message": "Server is busy", "type": "server_error", "code": "server_error"}},
     TransientProviderError, "Server is busy"),
    ("anthropic-overloaded", lambda: AnthropicAdapter(api_key="k"),
     {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
     TransientProviderError, "Overloaded"),
    ("responses-rate", lambda: OpenAIResponsesAdapter(api_key="k"),
     {"error": {"message": "Slow down", "type": "requests", "code": "rate_limit_exceeded"}},
     RateLimited, "Slow down"),
    ("gemini-exhausted", lambda: GeminiInteractionsAdapter(api_key="k"),
     {"error": {"code": 429, "message": "Resource has been exhausted",
                "status": "RESOURCE_EXHAUSTED"}}, RateLimited, "Resource has been exhausted"),
]


@pytest.mark.parametrize(("name", "adapter", "body", "kind", "message"), FAMILIES,
                         ids=[family[0] for family in FAMILIES])
async def test_a_retryable_json_error_with_200_is_classified_and_retried(
    name: str, adapter: Callable[[], ProviderAdapter], body: Any,
    kind: type[ProviderError], message: str,
) -> None:
    """A 200 ``application/json`` error object is the provider's classified error: a
    retryable one is retried before any output, and its message is kept."""
    classify = adapter().classify_error
    flaky = Flaky(json_200(body, "application/json; charset=utf-8"))
    async with serve(flaky) as server, transport_with(Sleeps()) as transport:
        events = await stream(transport, server, classify)
    assert [event.data for event in events] == ["1", "2"]
    assert flaky.attempts == 2
    one = Flaky(*[json_200(body)] * 3)
    async with serve(one) as server, transport_with(Sleeps()) as transport:
        with pytest.raises(kind) as caught:
            await stream(transport, server, classify)
    assert one.attempts == 3
    assert type(caught.value) is kind and caught.value.retryable
    assert message in caught.value.detail and caught.value.status == 200


@pytest.mark.parametrize("adapter", [
    lambda: ChatCompletionsAdapter(api_key="k"), lambda: AnthropicAdapter(api_key="k"),
    lambda: OpenAIResponsesAdapter(api_key="k"), lambda: GeminiInteractionsAdapter(api_key="k"),
], ids=["chat", "anthropic", "responses", "gemini"])
async def test_a_fatal_json_error_with_200_is_raised_at_once(
    adapter: Callable[[], ProviderAdapter],
) -> None:
    """A gateway's non-retryable error with HTTP 200 fails at once with its message (the
    key it echoes scrubbed), under ``Content-Type`` in any case."""
    body = {"error": {"message": f"Incorrect API key provided: {SECRET}",
                      "type": "invalid_request_error", "code": "invalid_api_key"}}
    flaky = Flaky(json_200(body, "Application/JSON"))
    async with serve(flaky) as server, transport_with(Sleeps()) as transport:
        with pytest.raises(FatalProviderError) as caught:
            await stream(transport, server, adapter().classify_error)
    assert flaky.attempts == 1
    assert "Incorrect API key provided" in str(caught.value)
    assert SECRET not in str(caught.value) and SECRET not in caught.value.detail


@pytest.mark.parametrize(("content_type", "body"), [
    ("application/json", COMPLETION),
    ("text/html; charset=utf-8", "<html><body>Welcome to the hotel wifi</body></html>"),
    ("application/json", '{"error": '),
], ids=["completion", "html", "truncated-json"])
async def test_a_2xx_body_that_is_no_error_fails_as_a_protocol_error(
    content_type: str, body: str,
) -> None:
    """A non-streamed completion (a proxy dropped ``stream: true``), or any other body
    that is no error object, fails at once, typed, naming its content type: no events,
    no retry, no hang."""
    flaky = Flaky(json_200(body, content_type))
    classify = ChatCompletionsAdapter(api_key="k").classify_error
    async with serve(flaky) as server, transport_with(Sleeps()) as transport:
        with pytest.raises(ProviderProtocolError) as caught:
            await asyncio.wait_for(stream(transport, server, classify), 10)
    assert flaky.attempts == 1
    assert content_type in str(caught.value) and "text/event-stream" in str(caught.value)
    assert "Galaxy Day" not in str(caught.value)  # the body is not quoted


@pytest.mark.parametrize("content_type", ["Text/Event-Stream; charset=utf-8",
                                          "text/plain; charset=utf-8",
                                          "application/octet-stream"])
async def test_an_event_stream_under_any_but_a_json_or_html_type_streams(
        content_type: str) -> None:
    """``text/event-stream`` in any case, with parameters, is the stream; so is an event
    stream some server labels otherwise (``text/plain``): only JSON and HTML answers are
    read as a body."""
    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": content_type})
        await response.prepare(request)
        await response.write(b"data: 1\n\n")
        await response.write_eof()
        return response

    classify = ChatCompletionsAdapter(api_key="k").classify_error
    async with serve(handler) as server, transport_with(Sleeps()) as transport:
        events = await stream(transport, server, classify)
    assert events == [SseEvent(data="1")]


@contextlib.asynccontextmanager
async def raw_server(answer: bytes) -> AsyncIterator[str]:
    """A server that answers every request with ``answer``'s bytes, then closes."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1/stream"
    finally:
        server.close()
        await server.wait_closed()


async def test_a_missing_content_type_is_read_as_the_stream_asked_for() -> None:
    """No ``Content-Type`` at all: the body is read as the event stream the request
    asked for, as before (a server that omits the header is not refused)."""
    answer = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\ndata: 1\n\ndata: 2\n\n"
    classify = ChatCompletionsAdapter(api_key="k").classify_error
    async with raw_server(answer) as url, transport_with(Sleeps()) as transport:
        events = await stream(transport, url, classify)
    assert [event.data for event in events] == ["1", "2"]


@pytest.mark.parametrize(("family", "kind", "attempts"), [
    (FAMILIES[0], RateLimited, 3), (FAMILIES[2], TransientProviderError, 3)],
    ids=["chat-rate", "anthropic-overloaded"])
async def test_a_bare_json_error_under_text_event_stream_keeps_its_message(
    family: tuple[str, Callable[[], ProviderAdapter], Any, type[ProviderError], str],
    kind: type[ProviderError], attempts: int,
) -> None:
    """A gateway answering 200 ``text/event-stream`` with a bare JSON error object (no
    ``data:`` framing) decodes to no event: the body is classified like a JSON one (its
    message kept, a retryable error retried), not dropped as a stream that never
    finished (wire4)."""
    _, adapter, body, _, message = family
    for trailer in ("", "\n"):
        flaky = Flaky(*[json_200(json.dumps(body) + trailer, "text/event-stream")] * 3)
        async with serve(flaky) as server, transport_with(Sleeps()) as transport:
            with pytest.raises(kind) as caught:
                await stream(transport, server, adapter().classify_error)
        assert flaky.attempts == attempts
        assert message in caught.value.detail and caught.value.status == 200


async def test_an_event_stream_of_no_event_and_no_error_still_just_ends() -> None:
    """A stream body with neither an event nor an error object ends as before (the
    parser then reports the stream that never finished)."""
    flaky = Flaky(json_200(": keep-alive\n\n", "text/event-stream"))
    classify = ChatCompletionsAdapter(api_key="k").classify_error
    async with serve(flaky) as server, transport_with(Sleeps()) as transport:
        assert await stream(transport, server, classify) == []
