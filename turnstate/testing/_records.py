"""Records the store conformance suite writes: turns built only from public names."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from turnstate.core._conversation import AuditState, Part, TextPart, Usage
from turnstate.core._envelope import ContinuationEnvelope, Mode
from turnstate.core._path import PathStep
from turnstate.storage._protocol import ChatRecord, Store, TurnCommit, TurnStart

T0 = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)


class ManualClock:
    """A clock that moves only when told to: pass it to the store under test."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def envelope(cursor: str, **changes: Any) -> ContinuationEnvelope:
    fields: dict[str, Any] = {"provider": "openai", "mode": Mode.RESPONSES,
                              "model_name": "gpt-4o", "system_prompt_hash": "sys",
                              "toolset_hash": "tools", "cursor": cursor, **changes}
    return ContinuationEnvelope(**fields)


def loop_state() -> ContinuationEnvelope:
    return ContinuationEnvelope(provider="anthropic", mode=Mode.STATELESS_LOOP,
                                model_name="claude", system_prompt_hash="sys",
                                toolset_hash="tools",
                                loop_messages=({"role": "assistant", "content": "x"},))


PATH = (PathStep(source="validate", trigger="continue_with_cursor", dest="cursor"),
        PathStep(source="cursor", trigger="completed", dest="persist"),
        PathStep(source="persist", trigger="committed", dest="done"))


def start(turn_id: str, text: str = "hello", lease_seconds: float = 60.0) -> TurnStart:
    return TurnStart(turn_id=turn_id, user_parts=(TextPart(text=text),), provider="openai",
                     model="gpt-4o", lease_seconds=lease_seconds)


def commit(cursor: str | None, parts: tuple[Part, ...] = (TextPart(text="hi"),),
           provider_state: ContinuationEnvelope | None = None) -> TurnCommit:
    state = provider_state if provider_state is not None else \
        envelope(cursor) if cursor is not None else None
    audit = AuditState(provider="openai", model_name="gpt-4o",
                       strategy="cursor" if cursor else "replay", system_prompt_hash="sys",
                       toolset_hash="tools", cursor=cursor)
    return TurnCommit(parts=parts, provider_state=state, audit=audit,
                      usage=Usage(input_tokens=10, output_tokens=2), context=None,
                      strategy=audit.strategy, path=PATH)


async def committed_turn(store: Store, chat_id: str, turn_id: str, *,
                         cursor: str | None = None, text: str = "hello",
                         reply: str = "hi") -> ChatRecord:
    """One whole turn through the protocol: begin, then commit."""
    lease = await store.begin_turn(chat_id, start(turn_id, text))
    return await store.commit_turn(lease, commit(cursor, parts=(TextPart(text=reply),)))


def cursor_of(state: str | None) -> str | None:
    return None if state is None else json.loads(state)["cursor"]
