"""Telling a turn's holder that the store took its lease from it (lifecycle5).

``signal_fenced`` calls this process's ``TurnSignals.fenced`` handlers (the engines here,
whose ``LeaseKeeper`` stops the turn at once); ``announce_fenced`` does that and tells
the store's other processes where it can (PostgreSQL: a notification). Apart from
``_turn_log`` so that ``_release`` (which ``_turn_log`` reads its reason from) can call
it without an import cycle.
"""

from __future__ import annotations

import contextlib


def signal_fenced(store: object, turn_id: str) -> None:
    """Tell this process's handlers that the store took ``turn_id``'s lease from it (a
    store without a turn log has no signals: its turns learn it at their next renewal)."""
    log = getattr(store, "turn_log", None)
    if log is not None:
        log.signals.fenced(turn_id)


async def announce_fenced(store: object, turn_id: str) -> None:
    """``signal_fenced``, then to the other processes of the store where it can tell
    them (PostgreSQL: a notification, which this process hears again: harmless); never
    raises (the other nodes' next renewal is the fallback)."""
    signal_fenced(store, turn_id)
    announce = getattr(getattr(store, "turn_log", None), "announce_fenced", None)
    if announce is not None:
        with contextlib.suppress(Exception):  # the database away: told in-process
            await announce(turn_id)

