"""Running the tools a model asked for: concurrently, bounded, and never crashing a turn.

Every way a call can go wrong (an unknown tool, arguments that are not JSON, hold
``NaN`` or an infinite number, or do not match the schema, an exception, a timeout, a
return value that cannot be made text, bytes or an image or file part, which no tool
result carries) becomes an error result the model sees, so it
can correct itself, and so does a ``CancelledError`` of the tool's own (a handler that
raises it, or awaits something another party cancelled) and any other ``BaseException``
a handler raises (``SystemExit`` from a library that exits on bad input, as ``argparse``
does, ``GeneratorExit``, a class of its own) but ``KeyboardInterrupt``, which goes on
as it would from any code (the user's interrupt is not the model's information). A
handler runs inside ``_contained``, so asyncio never sees its ``SystemExit`` (a task
re-raises one out of the event loop, ending the process). Only a cancellation of the
turn cancels the turn: the calls run as tasks of one ``asyncio.TaskGroup``, so a
cancelled turn cancels every call and awaits them all before it goes on. A handler is
cancelled at its timeout or the turn's cancellation and then waited for at most
``CANCEL_GRACE_SECONDS``: one that ignores its cancellation (catches it and carries on)
is abandoned there, with a warning, rather than hold the turn, its chat's lease, a stop
and a shutdown forever; its late value is never used. At most ``limit`` handlers run at
once; the other calls wait (their timeout starts when they run). An output UTF-8 cannot
encode (lone surrogates) is repaired with U+FFFD and the result says so, so the provider
request and the stored turn never fail on it.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import math
import time
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

import attrs

from turnstate.core._conversation import Tool, ToolCallPart, ToolResultPart
from turnstate.core._json import compact_json, json_problem
from turnstate.core._media import FilePart, ImagePart
from turnstate.core._schema import schema_problems
from turnstate.core._text import repaired
from turnstate.providers._scrub import scrub_text

logger = logging.getLogger("turnstate")  # the scrubbed logger (providers._scrub)

CANCEL_GRACE_SECONDS = 2.0
"""How long a cancelled handler may take to stop before it is abandoned."""
_ABANDONED: set[asyncio.Future[Any]] = set()  # held until they end (the loop keeps weak refs)


MAX_ERROR_CHARS = 20_000
"""The most characters of an error result's message (a tool's exception text): the
scrubber takes about 0.3 s per MB of the event loop, and a 50 MB message took 14 s."""
_SCRUB_MARGIN = 4_096  # past the cut: a key that starts before it is whole in the scrubbed text


def _error(call: ToolCallPart, message: str) -> ToolResultPart:
    """An error result; its text (a tool's exception message may quote a connection
    string or a key) goes through the one scrubber before the model, the store or the
    event stream sees it, cut to ``MAX_ERROR_CHARS`` (scrubbed with a margin past the
    cut, then cut)."""
    size = len(message)
    if size <= MAX_ERROR_CHARS:
        text = scrub_text(message)
    else:
        text = (scrub_text(message[:MAX_ERROR_CHARS + _SCRUB_MARGIN])[:MAX_ERROR_CHARS]
                + f" [turnstate: cut to {MAX_ERROR_CHARS:,} of {size:,} characters]")
    return ToolResultPart(call_id=call.call_id, name=call.name,
                          output=compact_json({"error": text}), is_error=True)


class _Exited(Exception):
    """A handler's ``BaseException`` that is neither ``Exception``, a cancellation nor
    ``KeyboardInterrupt``, carried out of its task as an ordinary exception."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(exc)
        self.exc = exc


async def _contained(made: Awaitable[Any]) -> Any:
    """Await a handler's awaitable; its ``SystemExit``, ``GeneratorExit`` or other
    ``BaseException`` (but a cancellation or ``KeyboardInterrupt``) leaves as ``_Exited``."""
    try:
        return await made
    except (Exception, asyncio.CancelledError, KeyboardInterrupt):
        raise
    except BaseException as exc:
        raise _Exited(exc) from None


def _failed(call: ToolCallPart, exc: BaseException) -> ToolResultPart:
    """The error result of a handler that raised ``exc``."""
    if isinstance(exc, _Exited):
        exc = exc.exc
    try:  # its ``__str__`` is the tool's code too, and may raise
        said = str(exc)
    except Exception as bad:
        said = f"(its message could not be read: {type(bad).__name__})"
    return _error(call, f"tool {call.name!r} failed: {type(exc).__name__}: {said}")


def _not_a_number(name: str) -> Any:
    """``NaN``, ``Infinity``, ``-Infinity``: Python's reader takes them, JSON has none."""
    msg = f"{name} is not a JSON number"
    raise ValueError(msg)


def _finite(text: str) -> float:
    """A number's text as a float, refused when it is past a float's range (``1e999``
    would reach the handler as infinity)."""
    value = float(text)
    if math.isinf(value):
        msg = f"the number {text[:40]} is too large"
        raise ValueError(msg)
    return value


def decode_arguments(call: ToolCallPart, tool: Tool) -> dict[str, Any] | str:
    """The call's arguments as an object, or the problem with them as text (``NaN``,
    ``Infinity`` and numbers past a float's range are not valid JSON here: the handler
    never gets a float that is not finite)."""
    text = call.arguments.strip() or "{}"
    try:
        value = json.loads(text, parse_constant=_not_a_number, parse_float=_finite)
    except json.JSONDecodeError as exc:
        return f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    except ValueError as exc:
        return f"arguments are not valid JSON ({exc})"
    except RecursionError:
        return "arguments are nested too deeply to read"
    if not isinstance(value, dict):
        return f"arguments must be a JSON object, got {type(value).__name__}"
    problems = schema_problems(value, tool.spec.parameters)
    if problems:
        return "arguments do not match the schema: " + "; ".join(problems[:5])
    return value


async def _stop(handler: asyncio.Future[Any], call: ToolCallPart) -> None:
    """Cancel ``handler`` and wait for it, at most ``CANCEL_GRACE_SECONDS`` (also when
    this wait is cancelled in turn): one still running then is abandoned, logged."""
    handler.cancel()
    try:
        await asyncio.wait((handler,), timeout=CANCEL_GRACE_SECONDS)
    finally:
        if handler.done():
            _retrieve(handler)
        else:
            logger.warning("tool %r (call %s) did not stop within %g s of its cancellation; "
                           "abandoned", call.name, call.call_id, CANCEL_GRACE_SECONDS)
            _ABANDONED.add(handler)
            handler.add_done_callback(_forget)


def _retrieve(handler: asyncio.Future[Any]) -> None:
    """Mark the outcome of a handler nobody reads as seen (no "never retrieved" log)."""
    if not handler.cancelled():
        handler.exception()


def _forget(handler: asyncio.Future[Any]) -> None:
    _ABANDONED.discard(handler)
    _retrieve(handler)


class BinaryOutput(Exception):
    """A handler returned bytes or an image or file part (``kind``), which no tool result
    carries: every wire turnstate speaks takes a tool's output as text."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


_BINARY = (bytes, bytearray, memoryview, ImagePart, FilePart)
_CONTAINERS = (list, tuple, set, frozenset)
_BINARY_SCAN = 100_000
"""The most values of a returned container searched for binary data (a bound, so a huge
result costs the scan no more than its ``str`` would)."""


def binary_inside(value: Any) -> str | None:
    """The type name of the first bytes, ``ImagePart`` or ``FilePart`` in ``value`` or in
    its lists, tuples, sets and dicts (keys and values), or None; iterative, so a deeply
    nested value is no recursion."""
    stack, seen = [value], 0
    while stack and seen < _BINARY_SCAN:
        item = stack.pop()
        seen += 1
        if isinstance(item, _BINARY):
            return type(item).__name__
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, _CONTAINERS):
            stack.extend(item)
    return None


def render_output(value: Any) -> str:
    """A handler's return value as the text the model gets.

    Raises:
        BinaryOutput: bytes, an ``ImagePart`` or a ``FilePart``, alone or inside the
            value: their ``str`` is escapes the model cannot read, billed as input.
    """
    if isinstance(value, str):
        return value
    if json_problem(value) is None:
        return compact_json(value)
    kind = binary_inside(value)
    if kind is not None:
        raise BinaryOutput(kind)
    return str(value)


async def run_tool(call: ToolCallPart, tool: Tool | None) -> ToolResultPart:
    """Run one call; every failure but cancellation becomes an error result."""
    if tool is None:
        return _error(call, f"unknown tool {call.name!r}")
    arguments = decode_arguments(call, tool)
    if isinstance(arguments, str):
        return _error(call, arguments)
    handler = _started(call, tool, arguments)
    if isinstance(handler, ToolResultPart):
        return handler
    try:
        await asyncio.wait((handler,), timeout=tool.timeout)
    except asyncio.CancelledError:  # the turn is being cancelled
        await _stop(handler, call)
        raise
    if not handler.done():
        await _stop(handler, call)
        return _error(call, f"tool {call.name!r} timed out after {tool.timeout:g} s")
    try:
        value = handler.result()
    except asyncio.CancelledError:  # the handler's own (the turn's cancellation is above)
        return _error(call, f"tool {call.name!r} was cancelled")
    except Exception as exc:  # a tool's failure is the model's information
        return _failed(call, exc)
    try:  # ``str`` may raise too: an int past 4,300 digits, deep nesting, a bad __str__
        output = render_output(value)
    except BinaryOutput as exc:
        logger.warning("tool %r returned %s: a tool result is text (the model gets an "
                       "error result)", call.name, exc.kind)
        return _error(call, f"tool {call.name!r} returned binary data ({exc.kind}), which "
                            "a tool result cannot carry: tool results are text (a "
                            "description, a URL or JSON)")
    except Exception as exc:
        return _error(call, f"tool {call.name!r} returned a value that cannot be shown as "
                            f"text: {type(exc).__name__}")
    return ToolResultPart(call_id=call.call_id, name=call.name, output=output)


def _started(call: ToolCallPart, tool: Tool, arguments: dict[str, Any]
             ) -> asyncio.Future[Any] | ToolResultPart:
    """The handler's call as a future, or the error result of a call that failed before
    it could be awaited: a handler that raised at once, or a plain ``def`` that returned
    its value, not an awaitable (a ``ToolHandler`` is async; both aborted the turn
    ``internal_error`` before, the plain one after it had run)."""
    try:
        made: object = tool.handler(arguments)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit too: a call made at once is no task's
        return _failed(call, exc)
    if not inspect.isawaitable(made):
        logger.error("tool %r: its handler returned %s, not an awaitable; a ToolHandler "
                     "must be an async function (async def)", call.name, type(made).__name__)
        return _error(call, f"tool {call.name!r} is misconfigured: its handler is not an "
                            "async function")
    return asyncio.ensure_future(_contained(made))


def repaired_result(result: ToolResultPart) -> ToolResultPart:
    """``result`` with text UTF-8 cannot encode replaced by U+FFFD, and a note saying so."""
    output, count = repaired(result.output)
    if not count:
        return result
    note = (f"\n[turnstate: {count} character(s) that UTF-8 cannot encode were replaced "
            "with U+FFFD]")
    return attrs.evolve(result, output=output + note)


def capped_result(result: ToolResultPart, max_chars: int | None) -> ToolResultPart:
    """``result`` cut to ``max_chars`` characters, with a note saying so (logged)."""
    size = len(result.output)
    if max_chars is None or size <= max_chars:
        return result
    logger.warning("tool %r (call %s) returned %d characters; the model gets the first %d",
                   result.name, result.call_id, size, max_chars)
    note = (f"\n[turnstate: the result was cut to its first {max_chars:,} of {size:,} "
            "characters]")
    return attrs.evolve(result, output=result.output[:max_chars] + note)


@attrs.frozen
class ToolTime:
    """When one call ran (wall clock, ns: what a trace span takes) and how it ended:
    ``error`` is None, ``tool_error`` (an error result) or ``cancelled`` (a stop or a
    cancel cut it)."""

    call_id: str
    name: str
    start_ns: int
    end_ns: int
    error: str | None = None


async def run_tools(
    calls: Sequence[ToolCallPart], tools: Mapping[str, Tool], limit: int = 8, *,
    max_chars: int | None = None, times: list[ToolTime] | None = None,
) -> list[ToolResultPart]:
    """Run ``calls`` as tasks of one task group, at most ``limit`` at once; results come
    back in call order, each cut to ``max_chars`` characters (``capped_result``), then
    repaired (``repaired_result``): the surrogate scan reads only what the model gets (a
    200 MB non-ASCII result held the event loop for 10 s before it was cut). ``times``
    gets each call's ``ToolTime`` as it ends (from when it got past the ``limit``; a call
    cut while it ran too, so an interrupted iteration still says what ran)."""
    gate = asyncio.Semaphore(limit)

    async def bounded(call: ToolCallPart) -> ToolResultPart:
        async with gate:
            start = time.time_ns()
            try:
                result = capped_result(await run_tool(call, tools.get(call.name)), max_chars)
            except BaseException:
                if times is not None:
                    times.append(ToolTime(call.call_id, call.name, start, time.time_ns(),
                                          "cancelled"))
                raise
            if times is not None:
                times.append(ToolTime(call.call_id, call.name, start, time.time_ns(),
                                      "tool_error" if result.is_error else None))
            return repaired_result(result)

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(bounded(call)) for call in calls]
    return [task.result() for task in tasks]
