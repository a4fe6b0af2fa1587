"""``Store.load_messages``'s rules, shared by the stores: its arguments, and the window
of rows already in ``seq`` order (the memory store's; the SQL stores select it in SQL)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from turnstate.core._errors import ConfigurationError

T = TypeVar("T")

SEQ_BOUND = 2**62
"""Past every stored seq and within every store's integers (SQLite's and PostgreSQL's
64 bits; a seq grows by two a turn)."""


def held_seq(seq: int) -> int:
    """``seq`` held within ``SEQ_BOUND`` either way: a seq past it names no message and
    bounds a window as the bound does (passed on as it is, a seq beyond 64 bits was an
    ``OverflowError`` in SQLite, a ``StorageError`` in PostgreSQL: a 500 behind the
    server's ``replace_from``)."""
    return max(-SEQ_BOUND, min(seq, SEQ_BOUND))


def check_window(limit: int, before_seq: int | None, after_seq: int | None) -> None:
    """A positive ``limit`` and at most one seq to read from."""
    if limit < 1:
        msg = f"limit must be at least 1, got {limit}"
        raise ConfigurationError(msg)
    if before_seq is not None and after_seq is not None:
        msg = "load_messages takes before_seq or after_seq, not both"
        raise ConfigurationError(msg)


def select_window(rows: Sequence[T], seqs: Sequence[int], limit: int,
                  before_seq: int | None, after_seq: int | None) -> tuple[list[T], bool]:
    """The window of ``rows`` (whose seqs, ascending, are ``seqs``) and whether more
    lie beyond it in the direction read."""
    if after_seq is not None:
        later = [row for row, seq in zip(rows, seqs, strict=True) if seq > after_seq]
        return later[:limit], len(later) > limit
    earlier = [row for row, seq in zip(rows, seqs, strict=True)
               if before_seq is None or seq < before_seq]
    return earlier[-limit:], len(earlier) > limit
