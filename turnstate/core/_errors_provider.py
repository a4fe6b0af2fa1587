"""The provider calls' errors, the ``ProviderError`` branch of the tree drawn in
``turnstate.core._errors`` (which re-exports them)."""

from __future__ import annotations

from turnstate.core._errors_base import TurnstateError


class ProviderError(TurnstateError):
    """A provider call failed.

    Attributes:
        provider: the provider's registry name (``openai``, ``anthropic``, ...).
        status: the HTTP status, or None for in-stream and connection errors.
        code: the provider's machine-readable error code or type, when it sent one.
        detail: the provider's message (never contains credentials).
        kind: the class of failure as a word (``ProviderFailure.error_type``).
    """

    retryable = False
    kind = "provider_error"

    def __init__(
        self,
        provider: str,
        detail: str,
        *,
        status: int | None = None,
        code: str | None = None,
    ) -> None:
        where = f"HTTP {status}" if status is not None else "stream"
        label = f" [{code}]" if code else ""
        super().__init__(f"{provider} {where}{label}: {detail}")
        self.provider = provider
        self.detail = detail
        self.status = status
        self.code = code


class TransientProviderError(ProviderError):
    """A failure worth retrying: rate limits, 5xx, 529, timeouts and connection loss."""

    retryable = True
    kind = "transient"


class RateLimited(TransientProviderError):
    """HTTP 429 (or an equivalent), with the server's ``Retry-After`` in seconds if sent."""

    kind = "rate_limited"

    def __init__(
        self,
        provider: str,
        detail: str,
        *,
        status: int | None = 429,
        code: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(provider, detail, status=status, code=code)
        self.retry_after = retry_after


class ProviderPoolExhausted(TransientProviderError):
    """Every connection of the transport's pool to the provider's host stayed busy for
    the whole ``PoolLimits.wait_seconds``; the request was never sent. Retryable by the
    embedder (a later turn finds the pool freer); the transport does not retry it itself,
    which would only wait again."""

    kind = "pool_exhausted"

    def __init__(self, provider: str, detail: str) -> None:
        super().__init__(provider, detail, code="pool_exhausted")


class CursorRejected(ProviderError):
    """The provider refused the durable cursor.

    ``reason`` is ``"cursor_expired"`` (missing, expired, evicted) or
    ``"cursor_invalid"`` (malformed or foreign); the driver maps it to the declared
    cursor-loss edges.
    """

    kind = "cursor_rejected"

    def __init__(
        self,
        provider: str,
        detail: str,
        *,
        reason: str,
        status: int | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(provider, detail, status=status, code=code)
        self.reason = reason


class FatalProviderError(ProviderError):
    """A request the provider will not accept however often it is sent."""

    kind = "fatal"


class ContextLengthExceeded(FatalProviderError):
    """The provider refused the request because its input (on a cursor: the whole
    conversation the provider stores) exceeds the model's context window (OpenAI
    ``context_length_exceeded``; Gemini's 400 "input token count ... exceeds the maximum
    number of tokens allowed"). Sending the same request again never helps; on a cursor
    turn the driver degrades to a trimmed replay (``context_overflow``); out of a replay
    or a local loop it trims further (``context_refused``).

    Attributes:
        input_tokens: the provider's own count of the refused input, when its message
            says it (Gemini "The input token count (N) ...", OpenAI "your messages
            resulted in N tokens", Anthropic "prompt is too long: N tokens > M maximum").
        context_limit: the window the provider says it enforced (M), when it says it.
    """

    kind = "context_length_exceeded"

    def __init__(
        self,
        provider: str,
        detail: str,
        *,
        status: int | None = None,
        code: str | None = None,
        input_tokens: int | None = None,
        context_limit: int | None = None,
    ) -> None:
        super().__init__(provider, detail, status=status, code=code)
        self.input_tokens = input_tokens
        self.context_limit = context_limit


class ProviderProtocolError(FatalProviderError):
    """The provider's bytes broke the wire format: a malformed frame, a truncated stream."""

    kind = "protocol_error"


class StreamLimitExceeded(FatalProviderError):
    """A response crossed one of the declared stream or response limits.

    ``limit`` names it (``max_stream_seconds``, ``max_stream_bytes``, ``max_line_bytes``,
    ``max_event_bytes``, ``max_event_gap_seconds``, ``max_output_deltas``,
    ``max_tool_calls``); the turn
    aborts ``provider_failed`` with a detail that names it too.
    """

    kind = "stream_limit"

    def __init__(self, provider: str, limit: str, detail: str) -> None:
        super().__init__(provider, f"{limit} exceeded: {detail}", code="stream_limit_exceeded")
        self.limit = limit
