"""The Anthropic emulator's stream: a complete message as Messages streaming sends it.

``message_start`` (no content, one output token), per block ``content_block_start`` /
deltas / ``content_block_stop`` (a ``ping`` after the first start), ``message_delta``
with the stop reason and cumulative usage, ``message_stop``. A ``tool_use`` block named
in ``cut`` stops halfway through its ``input_json_delta`` pieces: the output limit fell
inside the call (the tool-use guide's incomplete ``tool_use`` under ``max_tokens``).
"""

from __future__ import annotations

from collections.abc import Collection

from turnstate.core._json import JsonObject, compact_json
from turnstate.emulators._chat_completions import fragments, pieces


def refusal_details(explanation: str, model: str) -> JsonObject:
    """A refusal's ``stop_details`` as the recorded stream has them (``anthropic-refusal``:
    no content block at all, the words in ``stop_details.explanation``, a ``category``
    such as ``cyber``; null here: the scripted model names none)."""
    return {"type": "refusal", "category": None, "explanation": explanation,
            "recommended_model": model}


def _event(name: str, payload: JsonObject) -> tuple[str, str]:
    return name, compact_json({"type": name, **payload})


def partial_input(block: JsonObject) -> str:
    """The first half of a tool call's input JSON: never a whole object."""
    text = compact_json(block["input"])
    return text[:max(1, len(text) // 2)]


def _block_events(index: int, block: JsonObject, *, cut: bool) -> list[tuple[str, str]]:
    kind = block["type"]
    if kind == "thinking":
        start: JsonObject = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "text":
        start = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in pieces(block["text"])]
    elif kind in ("tool_use", "server_tool_use"):
        start = {"type": kind, "id": block["id"], "name": block["name"], "input": {}}
        text = partial_input(block) if cut else compact_json(block["input"])
        deltas = [{"type": "input_json_delta", "partial_json": p}
                  for p in ["", *fragments(text)]]
    elif kind == "compaction":  # null at the start, both fields in one delta
        start = {"type": "compaction", "content": None, "encrypted_content": None}
        delta: JsonObject = {"type": "compaction_delta", "content": block["content"],
                             "encrypted_content": block.get("encrypted_content")}
        deltas = [delta]
    else:  # redacted_thinking and server-tool results arrive whole
        start, deltas = block, []
    return [_event("content_block_start", {"index": index, "content_block": start}),
            *(_event("content_block_delta", {"index": index, "delta": d}) for d in deltas),
            _event("content_block_stop", {"index": index})]


def stream_events(message: JsonObject,
                  cut: Collection[str] = ()) -> list[tuple[str | None, str]]:
    """A complete message as the real event sequence; the ``tool_use`` blocks whose ids
    are in ``cut`` stream only part of their input."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None,
             "usage": {**usage, "output_tokens": 1}}
    start.pop("stop_details", None)
    events: list[tuple[str | None, str]] = [_event("message_start", {"message": start})]
    for index, block in enumerate(message["content"]):
        events += _block_events(index, block, cut=block.get("id") in cut)
        if index == 0:
            events.insert(2, _event("ping", {}))
    if not message["content"]:  # the recorded refusal: the ping right after the start
        events.append(_event("ping", {}))
    delta: JsonObject = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    if "stop_details" in message:
        delta["stop_details"] = message["stop_details"]
    events.append(_event("message_delta", {"delta": delta, "usage": usage}))
    events.append(_event("message_stop", {}))
    return events
