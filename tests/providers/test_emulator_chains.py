"""The chained emulators (Responses, Interactions) cost a continuation its new items, not
the chain's length, and keep each stored response's own items only (issue 25, defect
14). Work is counted, not timed: the prompt-cache hashes and the Python calls one
request makes (``sys.setprofile``), driven in process so nothing else runs meanwhile."""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from turnstate.emulators import _prompt_cache
from turnstate.emulators._base import ChainedEmulator, Item, RecordedRequest
from turnstate.emulators._gemini import GeminiInteractionsEmulator
from turnstate.emulators._responses import OpenAIResponsesEmulator
from turnstate.emulators._settings import wire_settings


def responses_body(text: str, previous: str | None) -> dict[str, Any]:
    return {"model": "gpt-4o", "instructions": "be terse", "prompt_cache_key": "k",
            "input": [{"role": "user", "content": text}],
            **({"previous_response_id": previous} if previous else {})}


def interactions_body(text: str, previous: str | None) -> dict[str, Any]:
    return {"model": "gemini-2.5-flash", "system_instruction": "be terse",
            "input": [{"type": "user_input", "content": [{"type": "text", "text": text}]}],
            **({"previous_interaction_id": previous} if previous else {})}


KINDS: dict[str, tuple[Callable[[], ChainedEmulator], Callable[..., dict[str, Any]]]] = {
    "responses": (OpenAIResponsesEmulator, responses_body),
    "interactions": (GeminiInteractionsEmulator, interactions_body),
}


class Chain:
    def __init__(self, kind: str) -> None:
        make, self.body = KINDS[kind]
        self.emulator = make()
        self.last: str | None = None
        self.turns = 0

    def step(self) -> str:
        self.turns += 1
        body = self.body(f"turn {self.turns:05d} of a long chat", self.last)
        recorded = RecordedRequest(method="POST", path="/", headers={},
                                   body=json.dumps(body).encode(), json=body)
        emulator: Any = self.emulator
        turn = emulator._prepare(recorded)
        reply = emulator.model.respond(turn.conversation, turn.tools,
                                       wire_settings(turn.body))
        self.last = str(emulator._respond(turn, reply)["id"])
        return self.last

    def grow(self, turns: int) -> None:
        for _ in range(turns):
            self.step()


def calls_of(action: Callable[[], object]) -> int:
    """How many Python and C function calls ``action`` makes."""
    count = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return count


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_continuation_costs_the_same_at_turn_6_and_turn_80(
    kind: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    hashes = 0
    chain_hash = _prompt_cache._chain

    def counted(previous: str, unit: str) -> str:
        nonlocal hashes
        hashes += 1
        return chain_hash(previous, unit)

    monkeypatch.setattr(_prompt_cache, "_chain", counted)
    chain = Chain(kind)
    chain.grow(5)
    hashes = 0
    early_calls = calls_of(chain.step)
    early_hashes = hashes
    chain.grow(73)
    hashes = 0
    late_calls = calls_of(chain.step)
    assert (early_hashes, hashes) == (early_hashes, early_hashes)
    assert late_calls <= early_calls * 1.1, (early_calls, late_calls)
    conversation = chain.emulator.conversation_for(chain.last or "")
    assert len(conversation) == 2 * chain.turns  # still the whole chat
    assert conversation[0] == Item(kind="user", text="turn 00001 of a long chat")


def held_slots(root: object) -> int:
    """The slots of every tuple, list and dict reachable from ``root``."""
    seen: set[int] = set()
    stack, slots = [root], 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, str | bytes | int | float | type):
            continue
        seen.add(id(obj))
        if isinstance(obj, tuple | list | dict):
            slots += len(obj)
        stack.extend(gc.get_referents(obj))
    return slots


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_stored_response_keeps_its_own_items(kind: str) -> None:
    chain = Chain(kind)
    chain.grow(40)
    at_40 = held_slots(chain.emulator.chains)
    chain.grow(40)
    at_80 = held_slots(chain.emulator.chains)
    assert at_80 <= 2.2 * at_40, (at_40, at_80)  # linear; a full copy each is quadratic
