"""Emulator faults scoped to the owner who queued them.

With the in-process emulators, one owner's "fail the next request" must fail that
owner's next turn, never another owner's. The turn handler names its owner in a context
variable; ``OwnerTagging`` (wrapped around the engine's transport only when the server
runs the emulators) copies it into an ``x-turnstate-owner`` header of every provider
request the turn sends; a fault queued by the owner matches that header alone.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextvars import ContextVar

import attrs

from turnstate.core._errors import ProviderError
from turnstate.providers._protocol import ErrorClassifier, HttpRequest, SseEvent, Transport

OWNER_HEADER = "x-turnstate-owner"
TURN_OWNER: ContextVar[str | None] = ContextVar("turnstate_turn_owner", default=None)
"""The owner of the turn the current task runs (set by the turn handler)."""


class OwnerTagging:
    """A transport that adds the running turn's owner as a header, then sends."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner

    def stream(self, request: HttpRequest, classify: ErrorClassifier
               ) -> AsyncGenerator[SseEvent, None]:
        owner = TURN_OWNER.get()
        if owner is not None:
            request = attrs.evolve(request, headers={**request.headers, OWNER_HEADER: owner})
        return self.inner.stream(request, classify)

    async def before_restart(self, restarts: int, error: ProviderError) -> bool:
        return await self.inner.before_restart(restarts, error)

    def __getattr__(self, name: str) -> object:  # aclose, __aenter__... of the transport
        return getattr(self.inner, name)
