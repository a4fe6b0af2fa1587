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

import attrs

from turnstate.core._errors import ProviderError, ProviderProtocolError
from turnstate.providers._protocol import (
    AttemptBudget,
    HttpRequest,
    ProviderAdapter,
    ProviderEvent,
    ProviderResponse,
    StreamParser,
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

    A retryable failure (an in-stream ``overloaded_error``, a connection lost) after
    events that showed the user nothing (``message_start``, ``ping``,
    ``response.created``) restarts the call with a fresh parser, when the transport's
    policy allows (``Transport.before_restart``) and the call's ``AttemptBudget`` (the
    requests it sent, the transport's own retries included) is not spent. Once text,
    reasoning or a tool call has streamed the failure is raised: output cannot be taken
    back. A failure before any event was the transport's to retry.

    Raises:
        ProviderError: scrubbed, with no ``__cause__`` or ``__context__``.
    """
    secrets = secrets_of(request.headers)
    budget = AttemptBudget()
    request = attrs.evolve(request, budget=budget)
    restarts = 0
    while True:
        attempt = _Attempt(adapter.stream_parser())
        try:
            async with aclosing(transport.stream(request, adapter.classify_error)) as stream:
                async for sse in stream:
                    attempt.received = True
                    for event in guarded(adapter.provider, attempt.parser.feed, sse):
                        attempt.shown = True
                        yield event
                    if attempt.parser.done:
                        break
            response = guarded(adapter.provider, _finish, attempt.parser)
        except ProviderError as exc:
            attempt.failure = exc
        except Exception as exc:  # a transport that broke its contract
            attempt.failure = ProviderProtocolError(
                adapter.provider, f"the stream failed: {type(exc).__name__}: {exc}")
        if attempt.failure is None:
            break
        failure = scrub_error(attempt.failure, secrets)
        if (not attempt.restartable() or budget.exhausted
                or not await transport.before_restart(restarts + 1, failure)):
            raise failure
        restarts += 1
    yield response


def _finish(parser: StreamParser) -> ProviderResponse:
    return parser.finish()


class _Attempt:
    """One try at a call: its parser, and what it streamed before it failed."""

    __slots__ = ("failure", "parser", "received", "shown")

    def __init__(self, parser: StreamParser) -> None:
        self.parser = parser
        self.received = False
        self.shown = False
        self.failure: ProviderError | None = None

    def restartable(self) -> bool:
        """A retryable failure after events, none of them user-visible output (text,
        reasoning, or a tool call the parser had begun: ``output_started``)."""
        started = bool(getattr(self.parser, "output_started", False))
        failure = self.failure
        return (failure is not None and failure.retryable and self.received
                and not self.shown and not started)
