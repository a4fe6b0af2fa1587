"""Pieces every codec shares: JSON requests, frame decoding, error bodies, envelopes."""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Callable, Container, Mapping, Sequence
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar

import attrs

from turnstate.core._compaction import same_model
from turnstate.core._conversation import OpaquePart, ToolCallPart
from turnstate.core._decisions import TurnContext
from turnstate.core._envelope import ContinuationEnvelope, Mode
from turnstate.core._errors import (
    CursorRejected,
    FatalProviderError,
    ProviderError,
    ProviderProtocolError,
    RateLimited,
    TransientProviderError,
)
from turnstate.core._json import JsonObject, compact_json
from turnstate.providers._protocol import HttpRequest, ProviderEvent, ProviderResponse, SseEvent
from turnstate.providers._scrub import remember_secret

logger = logging.getLogger("turnstate")


def opaque_part(provider: str, model: str, block: JsonObject) -> OpaquePart:
    """A block, item or step the codec does not model, kept verbatim (compact JSON)."""
    kind = text_of(block.get("type")) or "unknown"
    _log_opaque(provider, kind)
    return OpaquePart(provider=provider, model=model, kind=kind, raw=compact_json(block))


@functools.cache
def _log_opaque(provider: str, kind: str) -> None:
    """Once per process and kind: what a provider sends that turnstate keeps opaque."""
    logger.debug("[provider][opaque] %s sent a %r block turnstate does not model; it is "
                 "kept verbatim and replayed only to the same provider and model",
                 provider, kind)


def replayable(part: OpaquePart, provider: str, model: str) -> JsonObject | None:
    """The opaque block to send back, or None when it is another provider's or model's."""
    if part.provider != provider or not same_model(part.model, model):
        return None
    block = json.loads(part.raw)
    return block if isinstance(block, dict) else None


def key_or_env(api_key: str, variable: str) -> str:
    """The API key given, else the environment's ``variable`` (configuration, read once
    when an adapter is built; never logged, never stored). The key is remembered by the
    scrubber, so no error text or log record can carry it."""
    return remember_secret(api_key or os.environ.get(variable, ""))


TRANSIENT_STATUSES = frozenset({408, 409})  # besides every 5xx (529 included)


def json_request(
    provider: str, url: str, headers: Mapping[str, str], payload: JsonObject
) -> HttpRequest:
    """A POST of compact JSON that asks for an event stream."""
    all_headers = {
        "content-type": "application/json",
        "accept": "text/event-stream",
        **headers,
    }
    body = compact_json(payload).encode("utf-8")
    return HttpRequest(method="POST", url=url, headers=all_headers, body=body, provider=provider)


def unhandled_name(event: SseEvent, handled: Container[str]) -> bool:
    """The frame names itself (``event:``) and the parser has nothing for that name.

    Every provider that names its frames names them by the type inside (the wire
    reference: OpenAI Responses, Anthropic, Gemini Interactions), so such a frame is
    skipped without decoding its JSON: a cursor turn's ``content_part`` frames, Anthropic's
    ``ping`` and ``content_block_stop``, Gemini's ``step.stop``. An unnamed frame (SSE's
    default ``message``) is still decoded and dispatched by its type field.
    """
    return event.event != "message" and event.event not in handled


def load_frame(provider: str, event: SseEvent) -> JsonObject:
    """Decode an event's JSON data as an object, or fail the turn cleanly."""
    try:
        data = json.loads(event.data)
    except ValueError:
        msg = f"malformed frame in event {event.event!r}: {event.data[:80]!r}"
        raise ProviderProtocolError(provider, msg) from None
    if not isinstance(data, dict):
        msg = f"frame in event {event.event!r} is not a JSON object"
        raise ProviderProtocolError(provider, msg)
    return data


def error_fields(body: bytes) -> JsonObject:
    """The ``error`` object of an error body (``{"error": {...}}``), or ``{}``.

    Accepts the OpenAI/DeepSeek shape, Anthropic's ``{"type":"error","error":{...}}``
    and Gemini's ``{"error":{"code","message"}}``. Non-JSON bodies give
    ``{"message": <text>}``.
    """
    try:
        data = json.loads(body.decode("utf-8", errors="replace")) if body else {}
    except ValueError:
        return {"message": body.decode("utf-8", errors="replace")[:500]}
    if isinstance(data, dict):
        inner = data.get("error")
        if isinstance(inner, dict):
            return inner
        if isinstance(inner, str):
            return {"message": inner}
        return data
    return {}


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """``Retry-After`` in seconds (delta-seconds or an HTTP date), or None."""
    value = None
    for key, item in headers.items():
        if key.lower() == "retry-after":
            value = item.strip()
            break
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


QUOTA_CODES = frozenset({
    "insufficient_quota",  # OpenAI (and OpenAI-compatible servers), sent with HTTP 429
    "billing_hard_limit_reached", "billing_not_active",  # OpenAI
    "billing_error",  # Anthropic (HTTP 402)
    "insufficient_balance", "insufficient_funds", "payment_required",  # DeepSeek, relays
})
"""Error codes (or types) that say the account cannot pay: fatal whatever the status
(OpenAI sends ``insufficient_quota`` as a 429), in a body or inside a stream."""


def quota_code(fields: Mapping[str, Any]) -> str | None:
    """The ``code`` or ``type`` of an error object that is a quota or billing error."""
    for key in ("code", "type"):
        value = fields.get(key)
        if isinstance(value, str) and value in QUOTA_CODES:
            return value
    return None


def status_error(
    provider: str, status: int, headers: Mapping[str, str], detail: str, code: str | None
) -> ProviderError:
    """The generic classification: a quota or billing code fatal, 429 rate limited,
    408/409/5xx/529 transient, else fatal."""
    if code in QUOTA_CODES:
        return FatalProviderError(provider, detail, status=status, code=code)
    if status == 429:
        return RateLimited(provider, detail, status=status, code=code,
                           retry_after=parse_retry_after(headers))
    if status in TRANSIENT_STATUSES or status >= 500:
        return TransientProviderError(provider, detail, status=status, code=code)
    return FatalProviderError(provider, detail, status=status, code=code)


TOOL_PAIRING_MESSAGES = (
    "No tool output found for function call",
    "No tool call found for function call output",
)
"""How the durable APIs say a request's calls and outputs do not pair up."""


@attrs.frozen(kw_only=True)
class StreamCodes:
    """A provider's in-stream error codes that a retry may help with."""

    provider: str
    rate_limited: frozenset[str]
    transient: frozenset[str]


def classify_durable(
    codes: StreamCodes, status: int | None, headers: Mapping[str, str], *, message: str,
    code: str | None, cursor_reason: str | None,
) -> ProviderError:
    """The classification the Responses and Interactions APIs share, once the provider
    has read ``code`` and decided ``cursor_reason``: the cursor first, then a tool
    pairing complaint (turnstate renders every call with its output, so the provider
    saying otherwise is a rendering bug: logged at ERROR, fatal), then by status, or
    for an in-stream error (``status`` None) by code."""
    provider = codes.provider
    if cursor_reason is not None:
        return CursorRejected(provider, message, reason=cursor_reason, status=status, code=code)
    if message.startswith(TOOL_PAIRING_MESSAGES):
        logger.error("[provider][bug] %s rejected the tool pairing of a request: %s",
                     provider, message)
        return FatalProviderError(provider, message, status=status, code=code)
    if status is not None:
        return status_error(provider, status, headers, message, code)
    if code in QUOTA_CODES:
        return FatalProviderError(provider, message, code=code)
    if code in codes.rate_limited:
        return RateLimited(provider, message, status=None, code=code)
    if code in codes.transient:
        return TransientProviderError(provider, message, code=code)
    return FatalProviderError(provider, message, code=code)


def text_of(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def object_of(value: Any) -> JsonObject:
    """A JSON object field, ``{}`` when absent or not an object."""
    return value if isinstance(value, dict) else {}


def int_field(value: Any) -> int:
    """An integer field, 0 when absent or not an integer (``true`` is not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def standard_envelope(
    ctx: TurnContext,
    mode: Mode,
    response: ProviderResponse,
    *,
    loop_messages: tuple[JsonObject, ...],
    now: datetime,
    covers_seq: int,
) -> ContinuationEnvelope:
    """The envelope after a call: durable modes name the response id as the cursor;
    the stateless loop carries its messages and no cursor."""
    metadata = dict(response.metadata) or None
    base = ContinuationEnvelope(
        provider=ctx.provider,
        mode=mode,
        model_name=ctx.model_name,
        system_prompt_hash=ctx.system_prompt_hash,
        toolset_hash=ctx.toolset_hash,
        created_at=now,
        covers_seq=covers_seq,
        metadata=metadata,
    )
    if mode.durable:
        return attrs.evolve(base, cursor=response.response_id)
    return attrs.evolve(base, loop_messages=loop_messages)


def json_body_request(
    provider: str, url: str, headers: Mapping[str, str], body: bytes
) -> HttpRequest:
    """``json_request`` for a body already serialised as compact JSON (UTF-8).

    Codecs that assemble their body from pre-serialised message fragments (replay of a
    long history) use it to skip a second ``json.dumps`` over the whole payload.
    """
    all_headers = {"content-type": "application/json", "accept": "text/event-stream", **headers}
    return HttpRequest(method="POST", url=url, headers=all_headers, body=body, provider=provider)


PARALLEL_WRAPPER = "multi_tool_use.parallel"
"""A wrapper call some OpenAI models emit instead of parallel calls; never a real tool."""


def unwrap_parallel(provider: str, call: ToolCallPart) -> tuple[ToolCallPart, ...]:
    """``call`` itself, or the calls a ``multi_tool_use.parallel`` wrapper holds.

    The wrapper's arguments are ``{"tool_uses": [{"recipient_name": "functions.NAME",
    "parameters": {...}}, ...]}``; call ``n`` gets the id ``{wrapper id}_{n}``.

    Raises:
        ProviderProtocolError: the wrapper's arguments are not that shape.
    """
    if call.name != PARALLEL_WRAPPER:
        return (call,)
    try:
        value = json.loads(call.arguments)
    except ValueError:
        value = None
    uses = value.get("tool_uses") if isinstance(value, dict) else None
    if not isinstance(uses, list) or not uses:
        msg = f"{PARALLEL_WRAPPER} call {call.call_id} has no tool_uses list"
        raise ProviderProtocolError(provider, msg)
    return tuple(_unwrapped(provider, call, n, use) for n, use in enumerate(uses))


def _unwrapped(provider: str, call: ToolCallPart, n: int, use: Any) -> ToolCallPart:
    name = text_of(use.get("recipient_name")) if isinstance(use, dict) else None
    parameters = use.get("parameters", {}) if isinstance(use, dict) else None
    if not name or not isinstance(parameters, dict):
        msg = f"{PARALLEL_WRAPPER} call {call.call_id}: tool use {n} has no name or parameters"
        raise ProviderProtocolError(provider, msg)
    return attrs.evolve(call, call_id=f"{call.call_id}_{n}", name=name.removeprefix("functions."),
                        arguments=compact_json(parameters))


FrameHandler = Callable[[Any, JsonObject], Sequence[ProviderEvent]]
"""A stream parser's handler of one frame type: (parser, frame) → events."""


class FrameDispatcher:
    """What the Responses and Interactions stream parsers share: each SSE frame decoded
    and handed to its ``HANDLERS`` entry by its type field (``[DONE]``, ``event: done``
    and unknown types ignored), done once the terminal frame is kept in ``_final``."""

    PROVIDER: ClassVar[str]
    TYPE_KEY: ClassVar[str]
    FINAL_EVENT: ClassVar[str]
    HANDLERS: ClassVar[Mapping[str, FrameHandler]]
    _final: JsonObject | None = None

    @property
    def done(self) -> bool:
        return self._final is not None

    def feed(self, event: SseEvent) -> Sequence[ProviderEvent]:
        if event.event == "done" or event.data.strip() == "[DONE]":
            return ()
        if unhandled_name(event, self.HANDLERS):
            return ()
        frame = load_frame(self.PROVIDER, event)
        return self._dispatch(text_of(frame.get(self.TYPE_KEY)) or event.event, frame)

    def _dispatch(self, kind: str, frame: JsonObject) -> Sequence[ProviderEvent]:
        handler = self.HANDLERS.get(kind)
        return handler(self, frame) if handler is not None else ()

    def final_frame(self) -> JsonObject:
        """The terminal frame's object, or a protocol error when the stream stopped early."""
        if self._final is None:
            msg = f"the stream ended before {self.FINAL_EVENT}"
            raise ProviderProtocolError(self.PROVIDER, msg)
        return self._final
