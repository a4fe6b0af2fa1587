"""The interface between the turn driver and a provider: sans-IO codecs.

A provider adapter never touches a socket. For each state's action the driver hands it
a ``ProviderCall`` and gets back an ``HttpRequest``; the shared transport sends it and
yields ``SseEvent``s, which the adapter's ``StreamParser`` turns into provider events and,
at the end, one ``ProviderResponse``. Errors (HTTP statuses and error bodies, in-stream
error events) are classified by the adapter into the typed ``ProviderError`` tree.

Call shapes per strategy:

* ``cursor``: ``cursor`` is set. The first call of a turn sends the user's text; a call
  after a tool iteration sends ``tool_results`` (the outputs of the previous response's
  calls), chained on the newest response id. Instructions and tools are resent.
* ``replay``: no cursor; ``history`` (committed messages) plus the user's text. A turn
  that recovers in-flight tool results after losing its cursor also sends
  ``turn_parts`` (this turn's tool calls and their results, in order) after the user's
  text, rendered by the same replay rules as committed assistant parts.
* ``local_loop``: ``history`` plus the user's text plus ``loop_messages``, the wire
  messages this turn's tool loop has produced so far (``extend_loop`` builds them).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

import attrs

from turnstate.core._context import ContextSettings
from turnstate.core._conversation import (
    Message,
    Part,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
    UserPart,
)
from turnstate.core._cost import CachePolicy
from turnstate.core._decisions import Strategy, TurnContext
from turnstate.core._envelope import ContinuationEnvelope
from turnstate.core._errors import ProviderError
from turnstate.core._frozen import slot_maker
from turnstate.core._generation import GenerationSettings
from turnstate.core._json import JsonObject
from turnstate.core._media import ImagePart
from turnstate.core._registry import ModelInfo


def _tuple(value: Sequence[object]) -> tuple[object, ...]:
    """A tuple as it is (a subclass included: a ``CountedHistory`` keeps the facts the
    codecs read, ``latest_compaction`` looking only at its messages with an opaque
    part), any other sequence copied into one."""
    return value if isinstance(value, tuple) else tuple(value)


@attrs.frozen(kw_only=True)
class ProviderCall:
    """Everything a codec needs to build one request."""

    strategy: Strategy
    model: ModelInfo
    system_prompt: str
    tools: tuple[ToolSpec, ...] = attrs.field(converter=_tuple)
    settings: ContextSettings = attrs.field(factory=ContextSettings)
    generation: GenerationSettings = attrs.field(factory=GenerationSettings)
    """The turn's generation settings, mapped by each codec to its wire form."""
    history: tuple[Message, ...] = attrs.field(default=(), converter=_tuple)
    user_text: str = ""
    user_parts: tuple[UserPart, ...] = attrs.field(default=(), converter=_tuple)
    """The user's message as parts (text, images, files); empty: ``user_text`` alone."""
    cursor: str | None = None
    tool_results: tuple[ToolResultPart, ...] = attrs.field(default=(), converter=_tuple)
    loop_messages: tuple[JsonObject, ...] = attrs.field(default=(), converter=_tuple)
    iteration: int = 0
    """0 for the turn's first call, n after the n-th tool iteration."""
    turn_parts: tuple[Part, ...] = attrs.field(default=(), converter=_tuple)
    """Replay only: this turn's parts so far, sent after the user's text (recovery)."""
    cache: CachePolicy = CachePolicy.AUTO
    """Prompt caching for this request, resolved (the request's or the engine's)."""
    cache_key: str = ""
    """A routing key for the provider's prompt cache, derived from the chat
    (``prompt_cache_key``); empty when the caller has none."""

    @property
    def user_content(self) -> tuple[UserPart, ...]:
        """The user's message as parts: ``user_parts``, or one text part of ``user_text``."""
        return self.user_parts or (TextPart(text=self.user_text),)


class AttemptBudget:
    """The HTTP requests one provider call may send, shared by the transport's own
    retries and ``provider_batches``'s restarts, so they never multiply.

    ``provider_batches`` puts a fresh one on each call's ``HttpRequest``; a transport that
    keeps a budget records every request it sends with ``spend(max_attempts)``, and a
    call is not restarted once ``exhausted``. A transport that never spends it (the
    scripted backend) leaves restarts to its ``before_restart`` alone.

    ``deadline`` is the turn's (loop time; ``TurnLimits.turn_seconds``): a transport asks
    ``waits_past`` before a retry's wait, and gives the retry up when the wait would end
    past it (``past_deadline`` then says so, for the engine's abort).
    """

    __slots__ = ("clock", "cut_starts", "deadline", "limit", "past_deadline", "sent",
                 "started")

    def __init__(self, clock: Callable[[], datetime] | None = None,
                 deadline: float = float("inf")) -> None:
        self.deadline = deadline
        self.past_deadline = False
        self.sent = 0
        self.limit: int | None = None
        # When the latest request was sent (``clock``'s time at ``spend``: a price by the
        # hour is a request's start; None without a clock or a spend), and the start of
        # each request ``provider_batches`` recorded as cut, in the order of its ``cuts``.
        self.clock = clock
        self.started: datetime | None = None
        self.cut_starts: list[datetime | None] = []

    def spend(self, limit: int) -> None:
        """One more request sent, under a policy of ``limit`` requests per call."""
        self.limit = limit
        self.sent += 1
        if self.clock is not None:
            self.started = self.clock()

    @property
    def exhausted(self) -> bool:
        return self.limit is not None and self.sent >= self.limit

    def waits_past(self, delay: float, now: float) -> bool:
        """Would a retry's wait of ``delay`` seconds from ``now`` (loop time) end past the
        turn's deadline? Then the retry is not attempted (``past_deadline``)."""
        if now + delay > self.deadline:
            self.past_deadline = True
        return self.past_deadline

    def __repr__(self) -> str:
        return f"AttemptBudget(sent={self.sent}, limit={self.limit})"


@attrs.frozen(kw_only=True)
class HttpRequest:
    """A request ready for the transport. ``body`` is exactly the bytes sent;
    ``budget`` counts the requests its call sent (``AttemptBudget``; not compared)."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes
    provider: str = ""
    budget: AttemptBudget | None = attrs.field(default=None, eq=False)

    def __repr__(self) -> str:  # never print headers: they carry the API key
        return f"HttpRequest({self.method} {self.url}, {len(self.body)} bytes)"


@attrs.frozen(kw_only=True)
class SseEvent:
    """One dispatched server-sent event (WHATWG rules): ``event`` defaults to ``message``."""

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


@attrs.frozen(kw_only=True)
class TextDelta:
    text: str


@attrs.frozen(kw_only=True)
class ReasoningDelta:
    text: str


@attrs.frozen(kw_only=True)
class ImageOutput:
    """An image the model generated, whole (``core._media_output``): kept as an
    ``ImagePart`` of the answer, shown at once as an ``ImageOutputEvent``."""

    part: ImagePart


ProviderEvent = TextDelta | ReasoningDelta | ImageOutput

# The stream's per-frame values, built without attrs' frozen ``__init__`` (which sets
# every slot through a bound ``object.__setattr__``, about twice the cost): the same
# class and slots, so the same values (tests/providers/test_sse.py compares them).
_new = object.__new__
_sse_data, _sse_event, _sse_id, _sse_retry = (
    SseEvent.__dict__[name].__set__ for name in ("data", "event", "id", "retry"))
_text_slot = TextDelta.__dict__["text"].__set__
_reasoning_slot = ReasoningDelta.__dict__["text"].__set__


def sse_event(data: str, event: str, id: str | None) -> SseEvent:
    """``SseEvent(data=data, event=event, id=id)``, the decoder's per-frame value."""
    value: SseEvent = _new(SseEvent)
    _sse_data(value, data)
    _sse_event(value, event)
    _sse_id(value, id)
    _sse_retry(value, None)
    return value


def text_delta(text: str) -> TextDelta:
    """``TextDelta(text=text)``, a parser's per-delta value."""
    value: TextDelta = _new(TextDelta)
    _text_slot(value, text)
    return value


def reasoning_delta(text: str) -> ReasoningDelta:
    """``ReasoningDelta(text=text)``, a parser's per-delta value."""
    value: ReasoningDelta = _new(ReasoningDelta)
    _reasoning_slot(value, text)
    return value


@attrs.frozen(kw_only=True)
class ProviderResponse:
    """The result of one provider call, as the stream parser assembled it.

    Attributes:
        response_id: the provider's id for this response: the new cursor for durable
            providers (``resp_...``, ``v1_...``), informational otherwise.
        parts: reasoning, text and tool-call parts in output order.
        finish_reason: normalised: ``stop``, ``tool_calls``, ``length``,
            ``content_filter``, ``refusal`` or the provider's own value.
        raw_finish_reason: the provider's own value, unnormalised (``end_turn``,
            ``max_tokens``, ``requires_action``, ``incomplete: max_output_tokens``, ...),
            None when the stream named none.
        metadata: JSON facts worth keeping in the audit state (compaction, cache figures).
        billed_apart: tokens the request billed beyond ``usage``, which stays what the
            answer was sampled from (the context): Anthropic's compaction step
            (``usage.iterations`` of type ``compaction``). None when there were none.
    """

    response_id: str | None
    parts: tuple[Part, ...] = attrs.field(converter=_tuple)
    usage: Usage = attrs.field(factory=Usage)
    finish_reason: str | None = None
    metadata: JsonObject = attrs.field(factory=dict)
    raw_finish_reason: str | None = None
    billed_apart: Usage | None = None

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolCallPart))


# without attrs' ``__init__`` (``core._frozen``; issue 26): a call builds its request
# twice (the codec's, then the budgeted copy) and its response once; converters and
# validators run as ``__init__`` runs them (tests/providers/test_provider_records.py).
http_request: Callable[[str, str, Mapping[str, str], bytes, str, AttemptBudget | None],
                       HttpRequest] = slot_maker(HttpRequest)
"""``HttpRequest(method=, url=, headers=, body=, provider=, budget=)``, positionally."""
provider_response: Callable[[str | None, Sequence[Part], Usage, str | None, JsonObject,
                             str | None, Usage | None], ProviderResponse] = (
    slot_maker(ProviderResponse))
"""``ProviderResponse(response_id=, parts=, usage=, finish_reason=, metadata=,
raw_finish_reason=, billed_apart=)``, positionally."""


class StreamParser(Protocol):
    """Turns one response's SSE events into provider events, then a response."""

    def feed(self, event: SseEvent) -> Sequence[ProviderEvent]:
        """Consume one event.

        Raises:
            ProviderError: an in-stream error (classified like an HTTP error body), or
                ``ProviderProtocolError`` for a frame that breaks the wire format.
        """
        ...

    @property
    def done(self) -> bool:
        """True once the terminal event was seen; the transport may stop reading."""
        ...

    def finish(self) -> ProviderResponse:
        """The assembled response.

        Raises:
            ProviderProtocolError: the stream ended before its terminal event.
        """
        ...


class ProviderAdapter(Protocol):
    """One wire protocol. Every method is pure: no IO, no clocks, no randomness."""

    @property
    def provider(self) -> str:
        """The registry name (``openai``, ``gemini``, ``openai-compatible``, ...)."""
        ...

    def build_request(self, call: ProviderCall) -> HttpRequest: ...

    def stream_parser(self) -> StreamParser: ...

    def classify_error(
        self, status: int, headers: Mapping[str, str], body: bytes
    ) -> ProviderError:
        """Map a non-2xx response to the error tree (``CursorRejected`` for cursor loss);
        also a 2xx one that holds an error object instead of the event stream, whose
        status says nothing about it: its code or type decides, as inside a stream."""
        ...

    def extend_loop(
        self,
        call: ProviderCall,
        response: ProviderResponse,
        results: Sequence[ToolResultPart],
    ) -> tuple[JsonObject, ...]:
        """Stateless providers: ``call.loop_messages`` plus this iteration's assistant
        message and tool results, in wire format. Durable providers return ``()``."""
        ...

    def envelope(
        self,
        ctx: TurnContext,
        response: ProviderResponse,
        *,
        loop_messages: tuple[JsonObject, ...],
        now: datetime,
        covers_seq: int,
    ) -> ContinuationEnvelope:
        """The provider state after a call: a durable envelope naming
        ``response.response_id``, or a ``stateless-loop`` state carrying the loop."""
        ...


@runtime_checkable
class ThinksByDefault(Protocol):
    """An adapter whose own configuration turns extended thinking on for a turn whose
    settings name no budget (``AnthropicAdapter(thinking_budget_tokens=...)``). The engine
    asks it before the lease, so the thinking rules of ``check_settings`` hold for the
    request the adapter will really build."""

    def thinks_by_default(self, settings: GenerationSettings, model: ModelInfo) -> bool:
        """Whether a request with ``settings`` on ``model`` runs with the adapter's
        default thinking budget."""
        ...


def thinks_by_default(adapter: object, settings: GenerationSettings, model: ModelInfo) -> bool:
    """Whether ``adapter`` is a ``ThinksByDefault`` that thinks on this turn.

    The same test as ``isinstance(adapter, ThinksByDefault)`` (the method is present and
    not ``None``) by one attribute lookup: on Python 3.11 a runtime-checkable Protocol's
    ``isinstance`` walks the Protocol's members every call, about 20 us per turn (issue 26).
    """
    method = getattr(adapter, "thinks_by_default", None)
    return method is not None and bool(method(settings, model))


ErrorClassifier = Callable[[int, Mapping[str, str], bytes], ProviderError]
"""``adapter.classify_error``: status, headers and body of a non-2xx response (or of a
2xx one holding an error object instead of the stream) → error."""


class Transport(Protocol):
    """Sends requests and yields the response's SSE events.

    Implementations retry transient failures (classified by ``classify``) with bounded,
    jittered backoff honouring ``Retry-After``, but never once an event has been
    yielded; they raise the classified ``ProviderError`` otherwise, and
    ``TransientProviderError`` for connection loss and timeouts. A failure after
    events that showed no output is restarted by the caller (``provider_batches``)
    through ``before_restart``, under the same policy; a transport that spends the
    request's ``AttemptBudget`` (one ``spend`` per request sent) makes its retries and
    those restarts share one limit per call.
    """

    def stream(
        self, request: HttpRequest, classify: ErrorClassifier
    ) -> AsyncGenerator[SseEvent, None]:
        """An async generator (so callers can ``aclose`` it)."""
        ...

    async def before_restart(self, restarts: int, error: ProviderError) -> bool:
        """Whether a call may be sent again (its ``restarts``-th restart, 1-based) after
        ``error``, retryable, ended a stream that had shown no output; waits the
        policy's backoff first. False: raise the error."""
        ...
