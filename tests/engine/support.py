"""Shared pieces of the engine tests: a fake clock, an environment, turn helpers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from turnstate.core import Tool, ToolSpec
from turnstate.core._events import TurnAborted, TurnCompleted, TurnEvent
from turnstate.emulators._scripted import ScriptedBackend
from turnstate.engine._driver import TurnEngine
from turnstate.engine._turn_input import TurnInput
from turnstate.engine._writes import ABORT_GRACE_SECONDS
from turnstate.states import PathStep
from turnstate.storage import Store


class FakeClock:
    """A clock tests move by hand."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@attrs.frozen
class Outcome:
    """Everything one turn yielded."""

    events: tuple[TurnEvent, ...]

    @property
    def final(self) -> TurnCompleted | TurnAborted:
        last = self.events[-1]
        assert isinstance(last, TurnCompleted | TurnAborted)
        return last

    @property
    def committed(self) -> bool:
        return isinstance(self.final, TurnCompleted)

    @property
    def path(self) -> tuple[PathStep, ...]:
        return self.final.path

    @property
    def states(self) -> list[str]:
        return [self.path[0].source, *(step.dest for step in self.path)]

    @property
    def triggers(self) -> list[str]:
        return [step.trigger for step in self.path]

    def of_type(self, tag: str) -> list[Any]:
        return [e for e in self.events if e.type == tag]


@attrs.define
class Env:
    store: Store
    backend: ScriptedBackend
    engine: TurnEngine
    clock: FakeClock
    chat_id: str
    outcomes: list[Outcome] = attrs.field(factory=list)

    async def turn(self, text: str = "hello", **kwargs: Any) -> Outcome:
        outcome = await collect(self.engine.run_turn(self.chat_id, make_turn(text, **kwargs)))
        self.outcomes.append(outcome)
        return outcome


def short_lease_engine(env: Env) -> TurnEngine:
    """``env``'s engine with a lease of ``ABORT_GRACE_SECONDS`` (1 s) on the same store,
    backend and clock: a turn cancelled in its begin waits for its release until its
    lease would run out, so a test whose begin lands only after that wait gave up waits
    1 s rather than the default lease's 30 s (the store's leases run on the fake clock)."""
    return TurnEngine(env.store, env.backend.adapters(), env.backend, clock=env.clock,
                      lease_seconds=ABORT_GRACE_SECONDS)


async def collect(events: AsyncIterator[TurnEvent]) -> Outcome:
    return Outcome(events=tuple([event async for event in events]))


def make_turn(text: str = "hello", *, provider: str = "openai", model: str = "gpt-4o",
              prompt: str = "You are terse.", tools: tuple[Tool, ...] | None = None,
              **kwargs: Any) -> TurnInput:
    return TurnInput(provider=provider, model=model, system_prompt=prompt, user_text=text,
                     tools=default_tools() if tools is None else tools, **kwargs)


async def _echo(args: dict[str, Any]) -> Any:
    return {"echo": args}


def tool(name: str, handler: Callable[[dict[str, Any]], Any] | None = None, *,
         parameters: dict[str, Any] | None = None, timeout: float = 5.0) -> Tool:
    spec = ToolSpec(name=name, description=f"the {name} tool",
                    parameters=parameters or {"type": "object",
                                              "properties": {"city": {"type": "string"}},
                                              "required": ["city"]})
    return Tool(spec=spec, handler=handler or _echo, timeout=timeout)


def default_tools() -> tuple[Tool, ...]:
    return (tool("weather"), tool("time"))


async def forever(_: dict[str, Any]) -> Any:
    """A tool that never returns (until cancelled)."""
    await asyncio.Event().wait()


@contextmanager
def collecting_only_newer_objects() -> Iterator[None]:
    """Inside the block the collector walks only objects made inside it: everything
    alive before is frozen out of its reach (``gc.freeze``) and given back after.

    For tests that drop an iterator and ``collected_and_closed()`` it: made inside the
    block, the iterator is still found, but a full collection no longer walks the whole
    heap a long run has built (~0.2 s each in a full run, and more as the heap grows)."""
    import gc

    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


async def collected_and_closed() -> None:
    """Collect garbage, then await the ``aclose()`` tasks the loop's async-generator
    finalizer started for the iterators it found (asyncio schedules them at once)."""
    import gc

    gc.collect()
    await asyncio.sleep(0)  # the finalizer hook schedules aclose() with call_soon
    current = asyncio.current_task()
    closing = [t for t in asyncio.all_tasks()
               if t is not current and type(t.get_coro()).__name__ == "async_generator_athrow"]
    assert closing, "no aclose() task was started"
    await asyncio.gather(*closing)


def _boom(*args: Any, **kwargs: Any) -> Any:
    msg = "a bug"
    raise RuntimeError(msg)


@contextmanager
def broken(owner: object, name: str, replacement: Callable[..., Any] = _boom) -> Iterator[None]:
    """``owner.name`` raises while the block runs (an instance attribute, then removed)."""
    setattr(owner, name, replacement)
    try:
        yield
    finally:
        delattr(owner, name)
