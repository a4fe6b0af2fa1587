"""A fixed run of store operations on a file database, stopped at one exact point.

Run with ``sys.executable`` and no arguments, this script is a small fork server: it
imports turnstate once, then for each line ``DB<TAB>INDEX:POINT`` on stdin forks a
child that runs ``OPS`` in order against ``DB``. When operation ``INDEX`` reaches
checkpoint ``POINT`` (a ``SqliteStore._checkpoint`` name such as ``commit:chat``, or
``script:point`` between operations), the child writes ``PID POINT`` to stdout and
blocks; the parent test reads that line and kills the child with SIGKILL, so the kill
lands exactly there, then sends ``reap PID`` and the server answers ``reaped PID
STATUS`` once the child is gone. A child that never reaches its point writes ``PID
finished``. (Forking skips the interpreter start and imports per kill, which dominate
otherwise.) Children also exit when the server does, so nothing outlives the test.

The module is also imported by ``test_crash`` for ``OPS``, ``expected_after`` and the
clock values, so the script and its checker cannot drift apart.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime, timedelta

import attrs

from turnstate.core._conversation import AuditState, TextPart, TransitionPart, Usage
from turnstate.core._envelope import ContinuationEnvelope, Mode
from turnstate.storage import SqliteStore, TurnAbort, TurnCommit, TurnLease, TurnStart
from turnstate.storage._protocol import TurnStatus

T0 = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)
LEASE_SECONDS = 60.0
CHAT_ID = "chat"
CLEARING_REASON = "cursor_invalid"
"""Transitions with this reason clear the stored cursor (``clear_provider_state=True``)."""


@attrs.frozen
class Op:
    kind: str  # begin | transition | commit | abort | script
    turn: int = 0
    clear: bool = False
    advance: float = 1.0  # clock seconds before the operation


OPS: tuple[Op, ...] = (
    Op("script"),                   # 0: opened, chat created
    Op("begin", 1),
    Op("transition", 1),
    Op("commit", 1),
    Op("script"),                   # 4
    Op("begin", 2),
    Op("commit", 2),
    Op("script"),                   # 7
    Op("begin", 3),
    Op("transition", 3, clear=True),
    Op("script", advance=3600.0),   # 10: turn 3 is abandoned; its lease runs out
    Op("begin", 4),                 # reclaims turn 3
    Op("abort", 4),
    Op("script"),                   # 13
    Op("begin", 5),
    Op("commit", 5),
    Op("script"),                   # 16: done
)

POINTS = {
    "begin": ("before", "begun", "reclaimed", "messages", "turn", "lease", "before_commit",
              "committed"),
    "transition": ("before", "begun", "appended", "cleared", "before_commit", "committed"),
    "commit": ("before", "begun", "chat", "messages", "turn", "before_commit",
               "committed"),
    "abort": ("before", "begun", "user", "assistant", "turn", "lease", "before_commit",
              "committed"),
    "script": ("point",),
}
"""Every checkpoint an operation of each kind passes (``reclaimed`` and ``cleared`` only
when there is something to reclaim or clear)."""


def point_name(op: Op, point: str) -> str:
    return "script:point" if op.kind == "script" else f"{op.kind}:{point}"


def clock_at(index: int) -> datetime:
    """The clock while operation ``index`` runs."""
    return T0 + timedelta(seconds=sum(op.advance for op in OPS[: index + 1]))


@attrs.frozen(kw_only=True)
class Expected:
    """What the database must hold: the turns' statuses, the cursor, the lease, the version."""

    turns: tuple[tuple[str, TurnStatus], ...] = ()
    cursor: str | None = None
    active: str | None = None
    version: int = 0


def turn_id(turn: int) -> str:
    return f"t{turn}"


def apply(state: Expected, op: Op) -> Expected:
    """The reference model: the effect of one completed operation."""
    turns = dict(state.turns)
    if op.kind == "begin":
        if state.active is not None:  # only an expired lease can be there: reclaimed
            turns[state.active] = TurnStatus.ABORTED
        turns[turn_id(op.turn)] = TurnStatus.IN_PROGRESS
        return attrs.evolve(state, turns=tuple(turns.items()), active=turn_id(op.turn))
    if op.kind == "transition":
        return attrs.evolve(state, cursor=None) if op.clear else state
    if op.kind == "commit":
        turns[turn_id(op.turn)] = TurnStatus.COMPLETED
        return attrs.evolve(state, turns=tuple(turns.items()), cursor=f"resp_{op.turn}",
                            active=None, version=state.version + 1)
    if op.kind == "abort":
        turns[turn_id(op.turn)] = TurnStatus.ABORTED
        return attrs.evolve(state, turns=tuple(turns.items()), active=None)
    return state


def expected_after(index: int, point: str) -> Expected:
    """The state after a kill at ``point`` of operation ``index``: an operation counts only
    once its transaction committed."""
    state = Expected()
    last = index if point == "committed" else index - 1
    for op in OPS[: last + 1]:
        state = apply(state, op)
    return state


_HOLD: list[int] = []
"""The read end of a pipe nobody writes to: a stopped child blocks reading it."""


def _stop(name: str) -> None:
    os.write(1, f"{os.getpid()} {name}\n".encode())
    os.read(_HOLD[0], 1)  # blocks until killed (or EOF when the server exits)
    os._exit(3)


class SignallingStore(SqliteStore):
    """Stops the process at ``target`` (operation index, checkpoint name)."""

    target: tuple[int, str] = (-1, "")
    op_index = 0

    def _checkpoint(self, name: str) -> None:
        if (self.op_index, name) == self.target:
            _stop(name)


def _envelope(turn: int) -> ContinuationEnvelope:
    return ContinuationEnvelope(provider="openai", mode=Mode.RESPONSES, model_name="gpt-4o",
                                system_prompt_hash="s", toolset_hash="t", cursor=f"resp_{turn}")


def _audit(turn: int) -> AuditState:
    return AuditState(provider="openai", model_name="gpt-4o", strategy="cursor",
                      system_prompt_hash="s", toolset_hash="t", cursor=f"resp_{turn}")


async def _perform(store: SignallingStore, op: Op, leases: dict[int, TurnLease]) -> None:
    if op.kind == "begin":
        leases[op.turn] = await store.begin_turn(CHAT_ID, TurnStart(
            turn_id=turn_id(op.turn), user_parts=(TextPart(text=f"question {op.turn}"),),
            provider="openai", model="gpt-4o", lease_seconds=LEASE_SECONDS))
    elif op.kind == "transition":
        reason = CLEARING_REASON if op.clear else "model_changed"
        part = TransitionPart(reason=reason, strategy="replay", source_state="validate")
        await store.record_transition(leases[op.turn], part, clear_provider_state=op.clear)
    elif op.kind == "commit":
        await store.commit_turn(leases[op.turn], TurnCommit(
            parts=(TextPart(text=f"answer {op.turn}"),), provider_state=_envelope(op.turn),
            audit=_audit(op.turn), usage=Usage(input_tokens=1), context=None,
            strategy="cursor", path=()))
    elif op.kind == "abort":
        await store.abort_turn(leases[op.turn], TurnAbort(reason="provider_failed"))
    elif store.target == (store.op_index, "script:point"):
        _stop("script:point")


async def main(path: str, target: str) -> None:
    index, _, name = target.partition(":")
    now = [T0]
    async with SignallingStore.open(path, clock=lambda: now[0]) as store:
        store.target = (int(index), name)
        await store.create_chat(owner="crash", chat_id=CHAT_ID)
        leases: dict[int, TurnLease] = {}
        for op_index, op in enumerate(OPS):
            store.op_index = op_index
            now[0] = clock_at(op_index)
            await _perform(store, op, leases)


def _child(path: str, target: str) -> None:
    try:
        asyncio.run(main(path, target))
        os.write(1, f"{os.getpid()} finished\n".encode())
        os._exit(0)
    except BaseException as exc:  # report and leave without running the server's cleanup
        os.write(1, f"{os.getpid()} error {exc!r}\n".encode())
        os._exit(1)


def serve() -> None:
    hold_read, hold_write = os.pipe()
    _HOLD.append(hold_read)
    for line in sys.stdin:
        command, _, argument = line.rstrip("\n").partition(" ")
        if command == "reap":
            _, status = os.waitpid(int(argument), 0)
            sys.stdout.write(f"reaped {argument} {status}\n")
            sys.stdout.flush()
            continue
        path, _, target = line.rstrip("\n").partition("\t")
        if os.fork() == 0:
            os.close(hold_write)
            _child(path, target)
    os.close(hold_write)


if __name__ == "__main__":
    serve()
