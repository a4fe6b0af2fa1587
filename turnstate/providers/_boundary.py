"""One provider response as the engine consumes it: events, then the response.

``provider_batches`` is the providers layer's boundary for a call: it sends the request
through the transport, feeds the SSE events to the adapter's parser, and yields the
provider events (a list per batch the transport read together) and finally the
``ProviderResponse``. Every error that leaves it is a
``ProviderError`` that went through the scrubber (``_scrub``) with its exception chain
cut: classified HTTP errors, in-stream error events, malformed frames, and a codec's
or transport's unexpected exception (which becomes ``ProviderProtocolError``).
"""

from __future__ import annotations

import operator
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing, suppress
from typing import Any, TypeVar, cast

import attrs

from turnstate.core._citations import Citation
from turnstate.core._conversation import Part, Usage
from turnstate.core._errors import ProviderError, ProviderProtocolError, StreamLimitExceeded
from turnstate.core._text import mended
from turnstate.providers._protocol import (
    AttemptBudget,
    ErrorClassifier,
    HttpRequest,
    ProviderAdapter,
    ProviderEvent,
    ProviderResponse,
    SseEvent,
    StreamParser,
    Transport,
    http_request,
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


async def provider_batches(
    transport: Transport, adapter: ProviderAdapter, request: HttpRequest,
    cuts: list[Usage | None] | None = None, budget: AttemptBudget | None = None, *,
    cited: list[Callable[[], tuple[Citation, ...]]] | None = None,
    max_tool_calls: int | None = None,
) -> AsyncGenerator[list[ProviderEvent] | ProviderResponse, None]:
    """Yield one call's provider events, a non-empty list per batch of SSE events the
    transport read together, then its response; errors come out scrubbed.

    A transport with ``stream_batches`` (``AiohttpTransport``) hands over a network
    chunk's events at once, so an event costs this generator and the transport's no
    resumption of their own (issue 26); any other ``Transport`` is read event by event.
    Within a batch the events of each SSE event are parsed in order, and those parsed
    before a failing one are yielded before the failure is raised, as one by one.

    A retryable failure (an in-stream ``overloaded_error``, a connection lost) after
    events that showed the user nothing (``message_start``, ``ping``,
    ``response.created``) restarts the call with a fresh parser, when the transport's
    policy allows (``Transport.before_restart``) and the call's ``AttemptBudget`` (the
    requests it sent, the transport's own retries included) is not spent. Once text,
    reasoning or a tool call has streamed the failure is raised: output cannot be taken
    back. A failure before any event was the transport's to retry.

    ``cuts`` gets one entry per attempt the provider answered whose stream was cut
    before its response (a restart's first try, a failure, a cancel or a close by the
    consumer; not an error event the provider sent: ``_Attempt.cut``): what the
    parser's ``billed()`` says that request billed, None when it says nothing.

    ``cited``, when given, gets the parser's ``cited`` (the citations it read on the
    text it streamed) when the consumer cuts the stream (a stop, a cancel), to be read
    only if the stopped answer keeps text (``cited_now``): it keeps their sources.

    ``max_tool_calls``, when given, bounds the tool calls the stream may begin: a parser
    that counts them (its ``call_limit``, ``_tool_calls.CallLimit``) refuses the first
    call past it with ``StreamLimitExceeded`` as it streams, the attempt's bill kept in
    ``cuts`` (it is this side that cut the stream), rather than holding every call until
    the response is whole.

    ``budget``, when given, is the call's ``AttemptBudget`` (else a fresh one): its
    ``sent`` counts the call's HTTP requests afterwards (the engine's
    ``TurnStats.retries``), one per attempt for a transport that never spends it.

    Raises:
        ProviderError: scrubbed, with no ``__cause__`` or ``__context__``.
    """
    if budget is None:
        budget = AttemptBudget()
    request = _budgeted(request, budget)
    provider = adapter.provider
    restarts = amends = 0
    reading = _reading(type(transport))  # how this transport is read: once per call
    checked = getattr(adapter, "checked_response", None)  # DeepSeek's JSON-mode rule
    while True:
        attempt = _Attempt(adapter.stream_parser())
        parser = attempt.parser
        _limit_calls(parser, max_tool_calls)
        try:
            async with aclosing(_sse_batches(transport, request, adapter.classify_error,
                                             reading)) as stream:
                async for batch in stream:
                    attempt.received = True
                    out, failure = attempt.parse(batch, provider)
                    if out:
                        yield out
                    if failure is not None:
                        raise failure
                    if parser.done:
                        if reading == _FINISHING:  # it may pool the connection
                            await _complete(stream)
                        break
            response = _answer(provider, parser, request, checked)
        except ProviderError as exc:
            attempt.failure = exc
        except Exception as exc:  # a transport that broke its contract
            attempt.failure = ProviderProtocolError(
                provider, f"the stream failed: {type(exc).__name__}: {exc}")
        except BaseException:  # cancelled, or closed by the consumer mid-stream
            _cut(attempt, cuts, budget)
            if cited is not None:
                attempt.cite(cited)
            _unspent(budget)
            raise
        _unspent(budget)
        if attempt.failure is None:
            break
        _cut(attempt, cuts, budget)
        # raises the failure unless the call is sent again
        request, amends, restarts = await _next_try(
            transport, adapter, request, attempt, budget=budget, amends=amends,
            restarts=restarts)
    yield response


def _answer(provider: str, parser: StreamParser, request: HttpRequest,
            checked: Callable[[HttpRequest, ProviderResponse], ProviderResponse] | None
            ) -> ProviderResponse:
    """The parser's response (``_finish``, guarded), through the adapter's
    ``checked_response`` when it has one: a whole response it refuses (DeepSeek's blank
    JSON-mode answer) fails the attempt like an error after the stream, billed as a cut."""
    response: ProviderResponse = guarded(provider, _finish, parser)
    return response if checked is None else checked(request, response)


def _limit_calls(parser: StreamParser, max_tool_calls: int | None) -> None:
    """Set ``max_tool_calls`` (None: none) on a parser that counts its calls
    (``call_limit``)."""
    counter = getattr(parser, "call_limit", None) if max_tool_calls is not None else None
    if counter is not None:
        counter.limit = max_tool_calls


async def _next_try(transport: Transport, adapter: ProviderAdapter, request: HttpRequest,
                    attempt: _Attempt, *, budget: AttemptBudget, amends: int,
                    restarts: int) -> tuple[HttpRequest, int, int]:
    """After a failed attempt: the request to send next, and the amends and restarts
    counted. An optional field refused before any event is sent again without it
    (``_amended``); a retryable failure before any output restarts the call when the
    budget is not spent and the transport's policy agrees (``_Attempt.restartable``,
    ``Transport.before_restart``); else the failure is raised, scrubbed."""
    amended = _amended(adapter, request, attempt, amends, budget)
    if amended is not None:
        return amended, amends + 1, restarts
    assert attempt.failure is not None
    failure = scrub_error(attempt.failure, secrets_of(request.headers))
    if (not attempt.restartable() or budget.exhausted
            or not await transport.before_restart(restarts + 1, failure)):
        raise failure
    return request, amends, restarts + 1


MAX_AMENDS = 3
"""Amended requests a call may send (``_amended``): one per optional field refused."""


def _amended(adapter: ProviderAdapter, request: HttpRequest, attempt: _Attempt,
             amends: int, budget: AttemptBudget) -> HttpRequest | None:
    """The request an adapter sends again for a refusal before any event (its
    ``amended_request``: a Chat Completions server refusing an optional field), budgeted,
    or None (none, or ``MAX_AMENDS`` sent). Not bounded by the budget: the amended
    request is another request, not the same one retried (a policy of one attempt still
    gets it). Asked only on a failure, so an ordinary call pays nothing for it."""
    amend = getattr(adapter, "amended_request", None)
    if (amend is None or attempt.received or attempt.failure is None
            or amends >= MAX_AMENDS):
        return None
    amended: HttpRequest | None = amend(request, attempt.failure)
    return None if amended is None else _budgeted(amended, budget)


def _cut(attempt: _Attempt, cuts: list[Usage | None] | None, budget: AttemptBudget) -> None:
    """``attempt.cut(cuts)``, and the cut request's start beside it in the budget's
    ``cut_starts`` (its ``started``: None when the transport never spends the budget)."""
    if cuts is None:
        return
    count = len(cuts)
    attempt.cut(cuts)
    if len(cuts) > count:
        budget.cut_starts.append(budget.started)


def billed_usage(response: ProviderResponse) -> Usage:
    """What the provider bills for a whole ``response``: its usage, and what it bills
    apart (``billed_apart``), for a cut that records it (``cuts``)."""
    apart = response.billed_apart
    return response.usage if apart is None else response.usage + apart


def _unspent(budget: AttemptBudget) -> None:
    """An attempt ended: count it when the transport does not (it never spent the
    budget, so ``limit`` is still None and nothing is ever ``exhausted``)."""
    if budget.limit is None:
        budget.sent += 1


def _budgeted(request: HttpRequest, budget: AttemptBudget) -> HttpRequest:
    """``attrs.evolve(request, budget=budget)`` as one maker call (evolve reads the
    fields one by one through attrs' machinery, and attrs' ``__init__`` sets each slot
    through ``object.__setattr__``; ``test_boundary_costs`` holds the two equal field by
    field)."""
    return http_request(request.method, request.url, request.headers, request.body,
                        request.provider, budget)


_ONE_BY_ONE, _BATCHES, _FINISHING = "one by one", "batches", "batches, finished on send"
"""How ``provider_batches`` reads a transport (``_reading``): its ``stream`` event by
event; its ``stream_batches``; the same, telling it the call is complete."""


def _reading(cls: type) -> str:
    """How to read a transport of class ``cls``, worked out once per call from its MRO:
    ``stream_batches`` when the class that defines it also defines ``stream`` (a wrapper
    that forwards attributes to another transport, or a subclass that overrides
    ``stream`` alone, is never bypassed), sent ``True`` at the end when that class says
    so in its own body (``AiohttpTransport.FINISHES_ON_SEND``); else ``stream``."""
    batches = stream = None
    for klass in cls.__mro__:
        names = klass.__dict__
        if batches is None and "stream_batches" in names:
            batches = klass
        if stream is None and "stream" in names:
            stream = klass
    if batches is None or batches is not stream:
        return _ONE_BY_ONE
    return _FINISHING if batches.__dict__.get("FINISHES_ON_SEND") is True else _BATCHES


def _sse_batches(transport: Transport, request: HttpRequest, classify: ErrorClassifier,
                 reading: str) -> AsyncGenerator[list[SseEvent], bool | None]:
    """The transport's SSE events in batches: its own ``stream_batches`` when
    ``reading`` (``_reading`` of its class) says so, else ``stream``'s events one per
    batch."""
    if reading != _ONE_BY_ONE:
        stream: AsyncGenerator[list[SseEvent], bool | None] = cast(
            Any, transport).stream_batches(request, classify)
        return stream
    return _one_by_one(transport.stream(request, classify))


async def _complete(stream: AsyncGenerator[list[SseEvent], bool | None]) -> None:
    """Tell the transport's stream the call is complete (it settles its connection)."""
    with suppress(StopAsyncIteration):
        await stream.asend(True)


async def _one_by_one(stream: AsyncGenerator[SseEvent, None]
                      ) -> AsyncGenerator[list[SseEvent], bool | None]:
    async with aclosing(stream) as events:
        async for event in events:
            yield [event]


def _parse_failure(provider: str, exc: Exception) -> ProviderError:
    """What ``guarded`` raises for a parser's exception: a ``ProviderError`` as it is,
    anything else as a scrubbed protocol error without the codec's exception chained."""
    if isinstance(exc, ProviderError):
        return exc
    return scrub_error(ProviderProtocolError(
        provider, f"could not parse the provider's stream: {type(exc).__name__}: {exc}"))


def _finish(parser: StreamParser) -> ProviderResponse:
    response = parser.finish()
    parts = response.parts
    kept = tuple(map(_mended_part, parts))
    if all(map(operator.is_, kept, parts)):
        return response
    return attrs.evolve(response, parts=kept)


_FIELDS: dict[type, tuple[str, ...]] = {}
"""Each part class's field names, read once."""


def _mended_part(part: Part) -> Part:
    """``part`` with its text fields ``mended``: a JSON escape decodes to a surrogate
    code point (an emoji's halves in two deltas, a lone ``\\ud800``), which no request
    body or store can encode as UTF-8; kept, it failed every later request that sends
    the chat back. ``part`` itself when every field is ASCII or already UTF-8 text."""
    kind = type(part)
    names = _FIELDS.get(kind)
    if names is None:
        names = _FIELDS[kind] = tuple(field.name for field in attrs.fields(kind))
    changes: dict[str, Any] = {}
    for name in names:
        value = getattr(part, name)
        if type(value) is str and not value.isascii():
            try:  # the C encoder finds one several times faster than a regex search
                value.encode()
            except UnicodeEncodeError:
                changes[name] = mended(value)
    return attrs.evolve(cast(Any, part), **changes) if changes else part


class _Attempt:
    """One try at a call: its parser, and what it streamed before it failed."""

    __slots__ = ("failure", "feed_many", "parser", "received", "refused", "shown")

    def __init__(self, parser: StreamParser) -> None:
        self.parser = parser
        # A parser that takes a batch in one call (``FrameDispatcher.feed_many``), read
        # once per attempt; else its ``feed``, frame by frame.
        self.feed_many: Callable[[list[SseEvent], list[ProviderEvent]], None] | None = (
            getattr(parser, "feed_many", None))
        self.received = False
        self.shown = False
        self.refused = False
        self.failure: ProviderError | None = None

    def cut(self, cuts: list[Usage | None] | None) -> None:
        """Record this attempt in ``cuts`` when the provider answered it (events came)
        and its stream was cut on this side (a connection lost, a timeout, a malformed
        frame, a stream limit, a stop): the provider bills such a request. An attempt
        the provider itself ended with an error event (``refused``) is left out."""
        if cuts is None or not self.received or self.refused:
            return
        parser = self.parser
        billed = getattr(parser, "billed", None)
        try:
            if parser.done:  # whole, though never taken (a close at its last events)
                try:
                    response = parser.finish()
                except ProviderError:  # whole but no answer (a cancelled response):
                    cuts.append(billed() if billed is not None else None)  # its usage
                    return
                cuts.append(billed_usage(response))
            else:
                cuts.append(billed() if billed is not None else None)
        except Exception:  # a codec bug: the request's figures are unknown, not lost
            cuts.append(None)

    def cite(self, cited: list[Callable[[], tuple[Citation, ...]]]) -> None:
        """Put the parser's ``cited`` in ``cited`` (nothing read now: the cut path is
        the cancel path, kept as short as it was)."""
        reader = getattr(self.parser, "cited", None)
        cited[:] = () if reader is None else (reader,)

    def parse(self, batch: list[SseEvent], provider: str
              ) -> tuple[list[ProviderEvent], ProviderError | None]:
        """The provider events of a batch's SSE events, parsed in order until the
        parser is done, and the failure that stopped it early (as ``guarded`` makes it:
        a codec bug fails the call), raised once the events before it are yielded."""
        parser = self.parser
        out: list[ProviderEvent] = []
        many = self.feed_many
        try:
            if many is not None:  # the whole batch in one call (``FrameDispatcher``)
                many(batch, out)
            else:
                for sse in batch:
                    events = parser.feed(sse)
                    if events:
                        out.extend(events)
                    if parser.done:
                        break
        except Exception as exc:  # any codec failure fails the call, never the process
            # the provider's own error event, not a frame this side could not read
            # (a limit this side enforces, ``max_tool_calls``, is a cut: billed)
            self.refused = (isinstance(exc, ProviderError) and not isinstance(
                exc, ProviderProtocolError | StreamLimitExceeded))
            if out:
                self.shown = True
            return out, _parse_failure(provider, exc)
        if out:
            self.shown = True
        return out, None

    def restartable(self) -> bool:
        """A retryable failure after events, none of them user-visible output (text,
        reasoning, or a tool call the parser had begun: ``output_started``)."""
        started = bool(getattr(self.parser, "output_started", False))
        failure = self.failure
        return (failure is not None and failure.retryable and self.received
                and not self.shown and not started)


def cited_now(cited: list[Callable[[], tuple[Citation, ...]]]) -> tuple[Citation, ...]:
    """The citations a cut stream's parser read (``provider_batches``' ``cited``): none
    when it reads none, or on a codec bug (the text is kept without its sources)."""
    try:
        return cited[0]() if cited else ()
    except Exception:
        return ()
