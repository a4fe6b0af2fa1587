"""A commit still in flight when the turn's ending is itself cancelled (a second cancel
while the turn waits for the commit's outcome): the turn records its abort and goes, the
commit finishes alone, refused (the lease is gone), and its refusal is read, never
reported by the loop as "exception was never retrieved" (the flaky
``test_cancel_points::test_the_consumer_task_cancelled_twice[postgres-cursor]``, where
PostgreSQL's commit runs on a connection of its own)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from tests.engine.support import Env, broken, make_turn
from turnstate.engine import _writes
from turnstate.storage import TurnStatus


async def _suspended_on(task: asyncio.Future[Any], consumer: asyncio.Task[Any]) -> None:
    """Let the loop run until ``consumer`` waits on ``task`` again (bounded)."""
    for _ in range(100):
        await asyncio.sleep(0)  # one loop iteration: the consumer takes its next step
        if task._callbacks and not consumer.done():  # type: ignore[attr-defined]
            return
    raise AssertionError("the consumer never waited on the commit again")


async def test_a_commit_left_by_a_twice_cancelled_turn_has_its_refusal_read(
        env: Env) -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    gate, in_commit = asyncio.Event(), asyncio.Event()
    commits: list[asyncio.Future[Any]] = []
    commit = env.store.commit_turn

    async def held(*args: Any, **kwargs: Any) -> Any:
        task = asyncio.current_task()
        assert task is not None
        commits.append(task)
        in_commit.set()
        await gate.wait()
        return await commit(*args, **kwargs)

    try:
        with broken(env.store, "commit_turn", held):
            async def consume() -> None:
                async for _ in env.engine.run_turn(env.chat_id, make_turn("a")):
                    pass

            consumer = asyncio.ensure_future(consume())
            await in_commit.wait()
            await _suspended_on(commits[0], consumer)
            consumer.cancel()  # the consumer leaves while the commit is in flight
            await _suspended_on(commits[0], consumer)  # ``_cancel`` waits for its outcome
            consumer.cancel()  # and leaves that wait too: the abort is recorded
            await asyncio.wait([consumer])
            assert consumer.cancelled()
            (record,) = await env.store.list_turns(env.chat_id)
            assert record.status is TurnStatus.ABORTED
            gate.set()  # the commit goes on alone and is refused: the chat was released
            await asyncio.wait(commits)
            # refused, as the commit's own ``_exception`` says (``exception()`` would
            # read it: what this test checks the engine does)
            assert isinstance(commits[0]._exception, Exception)  # type: ignore[attr-defined]
            await asyncio.gather(*_writes._WRITING)
        commits.clear()
        del consumer
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert [c["message"] for c in reported] == []
    assert (await env.turn("b")).committed
