"""Every recorded stream, mutated, through its parser (wire10): cut at each frame
boundary, each frame sent twice, item and step indexes shuffled, an unknown event added
after each frame. Each run ends in a clean answer or a typed ``ProviderError``, never
another exception, and ``billed``/``cited`` never raise."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from turnstate.core._errors import ProviderError
from turnstate.emulators._emulated import kind_of
from turnstate.providers._protocol import ProviderResponse, SseEvent

RECORDED = Path("/work/shared/fixtures/recorded")
FOLDERS = {"openai-responses": ("openai", "type"), "chat-completions": ("openai-compatible", ""),
           "deepseek": ("deepseek", ""), "anthropic": ("anthropic", "type"),
           "gemini-interactions": ("gemini", "event_type")}


def _streams() -> Iterator[tuple[str, str]]:
    for folder in sorted(FOLDERS):
        for path in sorted((RECORDED / folder).glob("*.chunks.txt")):
            yield folder, path.name


def _events(folder: str, name: str) -> list[SseEvent]:
    key = FOLDERS[folder][1]
    out = []
    for line in (RECORDED / folder / name).read_text().splitlines():
        if not line.strip():
            continue
        try:
            kind = json.loads(line).get(key) if key else None
        except ValueError:
            kind = None
        out.append(SseEvent(data=line, event=kind if isinstance(kind, str) else "message"))
    return out


def _run(provider: str, events: list[SseEvent]) -> ProviderResponse | ProviderError:
    parser: Any = kind_of(provider).adapter(base_url="http://127.0.0.1:9",
                                            api_key="k").stream_parser()
    try:
        for event in events:
            parser.feed(event)
            if parser.done:
                break
        for reader in ("billed", "cited"):
            if hasattr(parser, reader):
                getattr(parser, reader)()
        return parser.finish()  # type: ignore[no-any-return]
    except ProviderError as exc:
        return exc


def _reindexed(events: list[SseEvent], seed: int) -> list[SseEvent]:
    """Each frame's ``index``/``output_index`` mapped through one shuffle of those seen."""
    frames = [json.loads(e.data) if e.data.startswith("{") else None for e in events]
    seen = sorted({f[k] for f in frames if f for k in ("index", "output_index")
                   if isinstance(f.get(k), int)})
    shuffled = seen[:]
    random.Random(seed).shuffle(shuffled)
    mapping = dict(zip(seen, shuffled, strict=True))
    out = []
    for event, frame in zip(events, frames, strict=True):
        if not frame:
            out.append(event)
            continue
        for key in ("index", "output_index"):
            if isinstance(frame.get(key), int):
                frame[key] = mapping[frame[key]]
        out.append(SseEvent(data=json.dumps(frame), event=event.event))
    return out


def _unknown(events: list[SseEvent], at: int, folder: str) -> list[SseEvent]:
    key = FOLDERS[folder][1] or "object"
    odd = SseEvent(data=json.dumps({key: "wire10.unknown", "index": 0, "delta": {"x": 1}}),
                   event="wire10.unknown" if FOLDERS[folder][1] else "message")
    return [*events[:at], odd, *events[at:]]


def _at(count: int) -> list[int]:
    """Positions ``0..count - 1``, or 12 of them spread over a long recording (kept fast)."""
    if count <= 12:
        return list(range(count))
    return sorted({round(i * (count - 1) / 11) for i in range(12)})


MUTATIONS: dict[str, Callable[[list[SseEvent], str], Iterator[list[SseEvent]]]] = {
    "cut": lambda ev, _: (ev[:n] for n in _at(len(ev) + 1)),
    "twice": lambda ev, _: ([*ev[:n + 1], ev[n], *ev[n + 1:]] for n in _at(len(ev))),
    "reindexed": lambda ev, _: (_reindexed(ev, seed) for seed in range(4)),
    "unknown": lambda ev, folder: (_unknown(ev, n, folder) for n in _at(len(ev) + 1)),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
@pytest.mark.parametrize(("folder", "name"), list(_streams()))
def test_a_mutated_recording_ends_in_an_answer_or_a_typed_error(
        folder: str, name: str, mutation: str) -> None:
    provider = FOLDERS[folder][0]
    events = _events(folder, name)
    whole = _run(provider, events)
    for mutated in MUTATIONS[mutation](events, folder):
        result = _run(provider, mutated)
        assert isinstance(result, ProviderResponse | ProviderError)
        if mutation == "unknown":  # an unknown event changes nothing
            assert type(result) is type(whole)
            if isinstance(whole, ProviderResponse):
                assert isinstance(result, ProviderResponse)
                assert result.parts == whole.parts
