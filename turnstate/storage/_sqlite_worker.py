"""The SQLite store's worker thread: one thread running submitted functions in order.

``SqliteConnection`` hops its operations here (``_sqlite_conn``); opening and closing the
connection run here too (``Worker.call``, ``store_closed``).
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from turnstate.core._errors import StorageError

T = TypeVar("T")


class Worker:
    """One thread running submitted functions in order (a queue and a loop: lighter per
    hop than an executor's futures)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="turnstate-sqlite",
                                        daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job()
            except RuntimeError:  # the event loop closed under a job's report: go on
                continue

    def idle(self) -> bool:
        """Nothing queued after the job now running (asked on the worker thread)."""
        return self._jobs.empty()

    def submit(self, job: Callable[[], None]) -> None:
        if self._closed:
            msg = "sqlite: the store is closed"
            raise StorageError(msg)
        self._jobs.put(job)

    async def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the thread, awaited (for opening and closing)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()

        def job() -> None:
            try:
                result = fn()
            except BaseException as exc:
                loop.call_soon_threadsafe(settle, done, None, exc)
            else:
                loop.call_soon_threadsafe(settle, done, result, None)

        self.submit(job)
        return await done

    def shutdown(self) -> None:
        """Stop after what is queued; the thread ends on its own."""
        if not self._closed:
            self._closed = True
            self._jobs.put(None)


def settle(done: asyncio.Future[Any], result: object, error: BaseException | None) -> None:
    """On the loop: a finished job's outcome to its caller, unless the caller left."""
    if done.done():
        return
    if error is not None:
        done.set_exception(error)
    else:
        done.set_result(result)


async def store_closed(worker: Worker, conn: sqlite3.Connection) -> None:
    """Close the connection on its worker (after whatever is queued there), then stop
    the worker."""
    try:
        await worker.call(conn.close)
    finally:
        worker.shutdown()
