"""How much of one node an owner may hold at once: open streams and running turns.

Without a bound, one token opened streams (a turn's, a resume's, a UI stream's) or
started detached turns (each on a new chat, its client gone at once) by the thousand:
every stream a task and a socket, every turn a provider request, until the process ran
out of file descriptors for everyone. ``OwnerLimits`` counts both per owner on this
node; past ``ServerConfig.max_streams_per_owner`` or ``max_turns_per_owner`` the request
is refused with ``429`` (``too_many_streams`` / ``too_many_turns``, ``Retry-After``)
before a turn is started or a stream opened. A count is two dict operations a request.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from turnstate.server._http import RETRY_AFTER_SECONDS, ApiError


def _too_many(error: str, message: str) -> ApiError:
    return ApiError(429, error, message, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def _too_many_streams(limit: int) -> ApiError:
    return _too_many("too_many_streams", f"at most {limit} streams may be open at once "
                     "per owner; close one or try again shortly")


def _too_many_turns(limit: int) -> ApiError:
    return _too_many("too_many_turns", f"at most {limit} turns may run at once per "
                     "owner; wait for one to end")


class OwnerLimits:
    """Per-owner counts of the open streams and running turns of this node."""

    def __init__(self, max_streams: int, max_turns: int) -> None:
        self.max_streams, self.max_turns = max_streams, max_turns
        self.streams: dict[str, int] = {}
        self.turns: dict[str, int] = {}

    @contextlib.contextmanager
    def stream(self, owner: str) -> Iterator[None]:
        """Hold one of ``owner``'s streams while the block runs (429 past the limit)."""
        count = self.streams.get(owner, 0)
        if count >= self.max_streams:
            raise _too_many_streams(self.max_streams)
        self.streams[owner] = count + 1
        try:
            yield
        finally:
            _drop(self.streams, owner)

    def take_turn(self, owner: str) -> None:
        """Count a turn about to start (429 past the limit); ``turn_ended`` gives it back."""
        count = self.turns.get(owner, 0)
        if count >= self.max_turns:
            raise _too_many_turns(self.max_turns)
        self.turns[owner] = count + 1

    def turn_ended(self, owner: str) -> None:
        _drop(self.turns, owner)


def _drop(counts: dict[str, int], owner: str) -> None:
    count = counts.get(owner, 0) - 1
    if count > 0:
        counts[owner] = count
    else:
        counts.pop(owner, None)
