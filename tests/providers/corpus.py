"""The hand-written wire corpus (``tests/providers/data/``): loading, parsing, describing.

Each case is one response as a provider (or a relay in front of one) streams it, written
from the public documentation and ``providers-wire.md``. A corpus test parses it and
compares the parts (as ``shape`` tuples), the finish reason and the usage with what the
stream itself says, then renders the next request and compares what it sends back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from tests.helpers import chunk_events
from turnstate.core._conversation import (
    Message,
    MessageStatus,
    Part,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from turnstate.providers import ProviderResponse, ReasoningDelta, SseEvent, TextDelta
from turnstate.providers._protocol import StreamParser

CORPUS = Path(__file__).resolve().parent / "data"
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)

Shape = tuple[Any, ...]


@attrs.frozen(kw_only=True)
class Case:
    """What one corpus stream must give.

    Attributes:
        parts: ``shape`` of each part, in order.
        replay: the wire messages (or items) that render the parts in the next request.
        error: the error the stream must raise instead (then only ``error_text`` counts).
    """

    parts: tuple[Shape, ...] = ()
    finish: str | None = None
    usage: Usage = attrs.field(factory=Usage)
    replay: tuple[Any, ...] = ()
    response_id: str | None = None
    error: type[Exception] | None = None
    error_text: str = ""


def events(protocol: str, name: str, *, event_key: str | None = "type") -> list[SseEvent]:
    return chunk_events(CORPUS / protocol / f"{name}.chunks.txt", event_key=event_key)


def case_names(protocol: str) -> set[str]:
    return {p.name.removesuffix(".chunks.txt") for p in (CORPUS / protocol).glob("*.chunks.txt")}


def parse(parser: StreamParser, stream: Sequence[SseEvent]) -> tuple[ProviderResponse, list[Any]]:
    """Feed every event; the response and the streamed deltas. Checks that the deltas
    add up to the text and reasoning parts (nothing shown that is not kept, or kept
    that was not shown)."""
    deltas: list[Any] = []
    for event in stream:
        deltas.extend(parser.feed(event))
    assert parser.done
    response = parser.finish()
    text = "".join(p.text for p in response.parts if isinstance(p, TextPart))
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == text
    shown = "".join(d.text for d in deltas if isinstance(d, ReasoningDelta))
    kept = [p.text for p in response.parts if isinstance(p, ReasoningPart)]
    assert shown in ("".join(kept), "\n\n".join(kept))
    return response, deltas


def shape(part: Part) -> Shape:
    """A part as a short tuple: what a case lists."""
    if isinstance(part, TextPart):
        return ("text", part.text, part.phase) if part.phase else ("text", part.text)
    if isinstance(part, ReasoningPart):
        return ("reasoning", part.kind, part.text, part.signature, part.data)
    if isinstance(part, ToolCallPart):
        if part.signature:
            return ("call", part.call_id, part.name, part.arguments, part.signature)
        return ("call", part.call_id, part.name, part.arguments)
    opaque = getattr(part, "raw", None)
    if opaque is not None:
        return ("opaque", getattr(part, "kind", ""), json.loads(opaque))
    return (type(part).__name__,)


def check(
    parser: StreamParser, stream: Sequence[SseEvent], case: Case,
    replay: Callable[[ProviderResponse], Sequence[Any]] | None = None,
) -> ProviderResponse | None:
    """Parse ``stream`` and compare with ``case``; ``replay`` renders the next request's
    copy of the response."""
    if case.error is not None:
        try:
            parse(parser, stream)
        except case.error as exc:
            assert case.error_text in str(exc)
            return None
        raise AssertionError(f"expected {case.error.__name__}")
    response, _ = parse(parser, stream)
    assert tuple(shape(p) for p in response.parts) == case.parts
    assert response.finish_reason == case.finish
    assert response.usage == case.usage
    if case.response_id is not None:
        assert response.response_id == case.response_id
    if replay is not None:
        assert tuple(replay(response)) == case.replay
    return response


def results_for(response: ProviderResponse) -> tuple[ToolResultPart, ...]:
    """One result per call of ``response``, ``ok:<name>``."""
    return tuple(ToolResultPart(call_id=c.call_id, name=c.name, output=f"ok:{c.name}")
                 for c in response.tool_calls)


def history(user: str, parts: Sequence[Part]) -> tuple[Message, ...]:
    """One committed turn: the user's message and an assistant message of ``parts``."""
    def message(seq: int, role: Role, *items: Part) -> Message:
        return Message(id=f"m{seq}", chat_id="c1", seq=seq, role=role,
                       status=MessageStatus.COMPLETED, parts=items, created_at=NOW,
                       updated_at=NOW)
    return (message(1, Role.USER, TextPart(text=user)), message(2, Role.ASSISTANT, *parts))


def usage(i: int, o: int, *, cached: int = 0, reasoning: int = 0,
          hit: int | None = None, miss: int | None = None) -> Usage:
    return Usage(input_tokens=i, output_tokens=o, cached_input_tokens=cached,
                 reasoning_tokens=reasoning, cache_hit_tokens=hit, cache_miss_tokens=miss)
