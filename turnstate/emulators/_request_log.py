"""An emulator's log of the requests it received, bounded (wire9).

``EmulatorBase.requests`` kept every ``RecordedRequest`` for the emulator's life: the
raw body and its decoded JSON, about twice a request's size, so an in-process emulator
that served large turns (inline images: tens of MiB a request) grew without end.
``RequestLog`` keeps the most recent ones: at most ``capacity`` requests and, past the
newest one (always kept, whatever its size), at most ``max_bytes`` of bodies. Older
ones are dropped first; ``total`` counts every request ever recorded and ``dropped``
those no longer held, so a test that must count can.

It reads as the list it replaced: ``len``, indexing and slicing from either end
(``requests[-1]``, ``requests[0]``: the oldest still held), iteration, ``==`` against
a list (``requests == []``), ``bool``; ``clear()`` empties it. Configure one emulator's
log with its attributes (``emulator.requests.capacity = 10``), every new emulator's
with ``EmulatorBase.REQUEST_LOG_CAPACITY`` / ``REQUEST_LOG_BYTES``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from typing import overload

from turnstate.emulators._faults import RecordedRequest

DEFAULT_CAPACITY = 1_000
"""The most requests held: far more than any test's turns send, few enough to bound."""
DEFAULT_BYTES = 64 << 20
"""The most body bytes held beside the newest request (64 MiB: two or three requests of
a turn with large inline images; a test reads the last one or two)."""


class RequestLog(Sequence[RecordedRequest]):
    """The most recent requests an emulator received (see the module docstring)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY,
                 max_bytes: int = DEFAULT_BYTES) -> None:
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.total = 0
        """Every request recorded since the log was made (or cleared)."""
        self._held: deque[RecordedRequest] = deque()
        self._bytes = 0

    @property
    def dropped(self) -> int:
        """Requests recorded but no longer held."""
        return self.total - len(self._held)

    @property
    def held_bytes(self) -> int:
        """The body bytes of the requests held."""
        return self._bytes

    def append(self, recorded: RecordedRequest) -> None:
        """Record ``recorded``, dropping the oldest past the bounds."""
        self._held.append(recorded)
        self._bytes += recorded.size
        self.total += 1
        held = self._held
        while len(held) > 1 and (len(held) > max(self.capacity, 1)
                                 or self._bytes > self.max_bytes):
            self._bytes -= held.popleft().size

    def clear(self) -> None:
        self._held.clear()
        self._bytes = self.total = 0

    def __len__(self) -> int:
        return len(self._held)

    @overload
    def __getitem__(self, index: int) -> RecordedRequest: ...

    @overload
    def __getitem__(self, index: slice) -> list[RecordedRequest]: ...

    def __getitem__(self, index: int | slice) -> RecordedRequest | list[RecordedRequest]:
        if isinstance(index, slice):
            return list(self._held)[index]
        return self._held[index]

    def __iter__(self) -> Iterator[RecordedRequest]:
        return iter(self._held)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RequestLog):
            return list(self._held) == list(other._held)
        if isinstance(other, list | tuple):
            return list(self._held) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, as the list it replaced

    def __repr__(self) -> str:
        return (f"RequestLog({len(self._held)} held of {self.total}, "
                f"{self._bytes:,} bytes)")
