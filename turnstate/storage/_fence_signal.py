"""Telling a turn's holder that the store took its lease from it (lifecycle5).

``signal_fenced`` calls this process's ``TurnSignals.fenced`` handlers (the engines here,
whose ``LeaseKeeper`` stops the turn at once); ``announce_fenced`` does that and tells
the store's other processes where it can (PostgreSQL: a notification). Apart from
``_turn_log`` so that ``_release`` (which ``_turn_log`` reads its reason from) can call
it without an import cycle.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

NOTIFY = "fence notify"
"""The name of a notification's task sent in the background (``announce_soon``)."""
_SENDING: set[asyncio.Task[Any]] = set()
"""``announce_soon``'s notifications in flight (held until sent)."""


def signal_fenced(store: object, turn_id: str) -> None:
    """Tell this process's handlers that the store took ``turn_id``'s lease from it (a
    store without a turn log has no signals: its turns learn it at their next renewal)."""
    log = getattr(store, "turn_log", None)
    if log is not None:
        log.signals.fenced(turn_id)


async def announce_fenced(store: object, *turn_ids: str) -> None:
    """``signal_fenced`` for each, then to the other processes of the store where it can
    tell them (PostgreSQL: one notification statement, which this process hears again:
    harmless); never raises (the other nodes' next renewal is the fallback)."""
    for turn_id in turn_ids:
        signal_fenced(store, turn_id)
    announce = getattr(getattr(store, "turn_log", None), "announce_fenced", None)
    if announce is not None and turn_ids:
        with contextlib.suppress(Exception):  # the database away: told in-process
            await announce(*turn_ids)


def announce_soon(store: object, turn_id: str) -> None:
    """``announce_fenced`` with the notification sent in the background: for a write
    whose caller must not wait on it, nor be cancelled after it landed (a begin that
    reclaimed an expired turn: lifecycle6)."""
    signal_fenced(store, turn_id)
    announce = getattr(getattr(store, "turn_log", None), "announce_fenced", None)
    if announce is not None:
        task = asyncio.get_running_loop().create_task(announce(turn_id), name=NOTIFY)
        _SENDING.add(task)
        task.add_done_callback(_sent)


def _sent(task: asyncio.Task[Any]) -> None:
    _SENDING.discard(task)
    if not task.cancelled():
        task.exception()  # read: the database away, the nodes' renewals tell them

