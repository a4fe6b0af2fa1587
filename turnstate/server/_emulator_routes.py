"""Controls of the in-process emulators (``serve --emulated`` only), for trying the
degradation paths from the page: expire a chat's stored cursor at its provider, or make
the provider's next request fail or stall. A fault is the queuing owner's: it meets that
owner's next request to the provider, never another owner's (``_owner_scope``), and an
owner has at most ``MAX_FAULTS_PER_OWNER`` waiting.
"""

from __future__ import annotations

from aiohttp import web

from turnstate.core._envelope import parse_envelope
from turnstate.core._errors import EnvelopeMalformed
from turnstate.emulators._base import ChainedEmulator, EmulatorBase, Fault
from turnstate.server._http import OWNER, ApiError, reject
from turnstate.server._owner_scope import OWNER_HEADER
from turnstate.server._routes import chat_id_field, read_json, services_of

ROUTES = web.RouteTableDef()
MAX_STALL_SECONDS = 600.0
MAX_FAULTS_PER_OWNER = 10
INJECTED = {"error": {"message": "Injected failure (turnstate serve emulator control)",
                      "type": "invalid_request_error", "code": "injected_failure"}}
RATE_LIMITED = {"error": {"message": "Rate limit reached (turnstate serve emulator control)",
                          "type": "rate_limit_error", "code": "rate_limit_exceeded"}}
MAX_RETRY_AFTER = 3600


def _retry_after(body: dict[str, object]) -> int:
    """The ``Retry-After`` seconds of a ``rate_limit`` fault (default 20)."""
    seconds = body.get("retry_after", 20)
    if type(seconds) is not int or not 0 <= seconds <= MAX_RETRY_AFTER:
        reject("retry_after", f"retry_after must be a whole number from 0 to {MAX_RETRY_AFTER}")
    return seconds


def _emulator(request: web.Request, provider: object) -> EmulatorBase:
    emulators = services_of(request).emulators
    assert emulators is not None  # these routes exist only with emulators
    if not isinstance(provider, str) or provider not in emulators.emulators:
        reject("provider", f"provider must be one of {sorted(emulators.emulators)}")
    return emulators.emulators[provider]


@ROUTES.post("/api/emulator/expire-cursor")
async def expire_cursor(request: web.Request) -> web.Response:
    """The provider forgets the chat's stored cursor (as after its retention period)."""
    body = await read_json(request)
    chat_id = chat_id_field(body, "chat_id")
    chat = await services_of(request).store.load_chat(chat_id, owner=request[OWNER])
    try:
        envelope = parse_envelope(chat.last_provider_state or "")
    except EnvelopeMalformed:
        raise ApiError(409, "no_cursor", "the chat has no stored cursor") from None
    emulator = _emulator(request, envelope.provider)
    if not isinstance(emulator, ChainedEmulator) or not envelope.cursor:
        raise ApiError(409, "no_cursor", "the chat has no stored cursor")
    emulator.expire(envelope.cursor)
    return web.json_response({"expired": True, "provider": envelope.provider})


@ROUTES.post("/api/emulator/faults")
async def push_fault(request: web.Request) -> web.Response:
    """``{"provider", "kind": "error" | "rate_limit" | "stall" | "hang", "seconds"?,
    "retry_after"?, "after_events"?}``: the caller's next request to the provider fails
    with HTTP 400 (the turn aborts ``provider_failed``) or with HTTP 429 and
    ``Retry-After: retry_after`` (a rate limit: the transport retries it while it has
    attempts), waits, or streams ``after_events`` events and then hangs until the turn lets
    go (a Stop)."""
    body = await read_json(request)
    emulator = _emulator(request, body.get("provider"))
    scope = (OWNER_HEADER, request[OWNER])
    kind = body.get("kind")
    if kind == "error":
        fault = Fault(status=400, body=INJECTED, header=scope)
    elif kind == "stall":
        seconds = body.get("seconds", 30)
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) \
                or not 0 < seconds <= MAX_STALL_SECONDS:
            reject("seconds", f"seconds must be a number in (0, {MAX_STALL_SECONDS:g}]")
        fault = Fault(delay=float(seconds), header=scope)
    elif kind == "rate_limit":
        fault = Fault(status=429, body=RATE_LIMITED, header=scope,
                      headers={"Retry-After": str(_retry_after(body))})
    elif kind == "hang":
        after = body.get("after_events", 6)
        if type(after) is not int or not 0 <= after <= 1000:
            reject("after_events", "after_events must be a whole number from 0 to 1000")
        fault = Fault(stall_after=after, header=scope)
    else:
        reject("kind", "kind must be 'error', 'rate_limit', 'stall' or 'hang'")
    if emulator.faults.pending(scope) >= MAX_FAULTS_PER_OWNER:
        raise ApiError(429, "too_many_faults",
                       f"at most {MAX_FAULTS_PER_OWNER} faults may wait per provider")
    emulator.faults.push(fault)
    return web.json_response({"queued": kind, "pending": emulator.faults.pending(scope)})
