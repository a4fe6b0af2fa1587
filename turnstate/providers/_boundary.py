"""One provider response as the engine consumes it: events, then the response.

``provider_stream`` is the providers layer's boundary for a call: it sends the request
through the transport, feeds the SSE events to the adapter's parser, and yields the
provider events and finally the ``ProviderResponse``. Every error that leaves it is a
``ProviderError`` that went through the scrubber (``_scrub``) with its exception chain
cut: classified HTTP errors, in-stream error events, malformed frames, and a codec's
or transport's unexpected exception (which becomes ``ProviderProtocolError``).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Any, TypeVar

from turnstate.core._errors import ProviderError, ProviderProtocolError
from turnstate.providers._protocol import (
    HttpRequest,
    ProviderAdapter,
    ProviderEvent,
    ProviderResponse,
    Transport,
)
from turnstate.providers._scrub import scrub_error, secrets_of

T = TypeVar("T")


def guarded(provider: str, step: Callable[[T], object], arg: T, *,
            doing: str = "parse the provider's stream") -> Any:
    """Run a codec step; a codec bug on odd input fails the call as a protocol error
    whose message says what the codec was ``doing``."""
    try:
        return step(arg)
    except ProviderError:
        raise
    except Exception as exc:  # any codec failure fails the call, never the process
        failure = ProviderProtocolError(
            provider, f"could not {doing}: {type(exc).__name__}: {exc}")
    raise scrub_error(failure)  # outside the except block: no chain to the codec's error


async def provider_stream(
    transport: Transport, adapter: ProviderAdapter, request: HttpRequest
) -> AsyncGenerator[ProviderEvent | ProviderResponse, None]:
    """Yield one call's provider events, then its response; errors come out scrubbed.

    Raises:
        ProviderError: scrubbed, with no ``__cause__`` or ``__context__``.
    """
    secrets = secrets_of(request.headers)
    parser = adapter.stream_parser()
    failure: ProviderError | None = None
    try:
        async with aclosing(transport.stream(request, adapter.classify_error)) as stream:
            async for sse in stream:
                for event in guarded(adapter.provider, parser.feed, sse):
                    yield event
                if parser.done:
                    break
        response = guarded(adapter.provider, lambda _: parser.finish(), None)
    except ProviderError as exc:
        failure = exc
    except Exception as exc:  # a transport that broke its contract
        failure = ProviderProtocolError(adapter.provider,
                                        f"the stream failed: {type(exc).__name__}: {exc}")
    if failure is not None:
        raise scrub_error(failure, secrets)
    yield response
