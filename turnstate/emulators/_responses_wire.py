"""Wire shapes the OpenAI Responses emulator speaks: conversation items, output items,
the SSE event sequence and error bodies (providers-wire.md 1.3 to 1.7)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from turnstate.core._json import JsonObject, compact_json
from turnstate.emulators._base import Item, canonical_arguments, text_deltas
from turnstate.emulators._chain import ChainBuilder, ChainView, chain_of
from turnstate.emulators._media import user_item

ARGUMENT_CHUNK = 8


def error_body(
    message: str,
    *,
    kind: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> JsonObject:
    """The OpenAI error body: ``{"error": {message, type, param, code}}``."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def chunks(text: str, size: int = ARGUMENT_CHUNK) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


# --- conversation items --------------------------------------------------------------


def content_text(content: Any) -> str:
    """A message's text: a string, or the text of its ``input_text``/``output_text``
    parts and ``refusal`` parts (a refusal is the assistant's answer)."""
    if isinstance(content, str):
        return content
    texts = []
    for part in content if isinstance(content, list) else []:
        for key in ("text", "refusal"):
            if isinstance(part, Mapping) and isinstance(part.get(key), str):
                texts.append(part[key])
    return "".join(texts)


def output_text(output: Any) -> str:
    """A ``function_call_output``'s output as text (a string, or content parts)."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return content_text(output)
    return compact_json(output)


def conversation_items(inputs: Iterable[Mapping[str, Any]], prior: Sequence[Item]) -> list[Item]:
    """``prior`` followed by the conversation carried by input or output items."""
    builder = ChainBuilder(chain_of(prior))
    add_items(builder, inputs)
    return list(ChainView(builder.node()))


def add_items(builder: ChainBuilder, inputs: Iterable[Mapping[str, Any]]) -> None:
    """Append the conversation that input or output items carry to ``builder``."""
    for raw in inputs:
        kind = item_type(raw)
        if kind == "message":
            role = raw.get("role")
            if role == "user":
                builder.append(user_item(raw.get("content")))
            elif role == "assistant":
                text = content_text(raw.get("content"))
                if text:
                    builder.append(Item(kind="assistant", text=text))
        elif kind == "function_call":
            call_id = str(raw.get("call_id") or "")
            builder.append(Item(kind="tool_call", call_id=call_id,
                                name=str(raw.get("name") or ""),
                                text=canonical_arguments(str(raw.get("arguments") or ""))))
        elif kind == "function_call_output":
            call_id = str(raw.get("call_id") or "")
            builder.append(Item(kind="tool_result", call_id=call_id,
                                name=builder.name_of(call_id),
                                text=output_text(raw.get("output"))))


def item_type(raw: Mapping[str, Any]) -> str:
    """An input item's type; ``type`` is optional on easy messages."""
    kind = raw.get("type")
    if kind is None and "role" in raw:
        return "message"
    return str(kind)


# --- streaming -----------------------------------------------------------------------


def stream_events(body: Mapping[str, Any]) -> list[tuple[str | None, str]]:
    """The SSE ``(event, data)`` pairs of a completed response, in the real order."""
    skeleton = {**body, "status": "in_progress", "output": [], "usage": None}
    payloads: list[tuple[str, JsonObject]] = [
        ("response.created", {"response": skeleton}),
        ("response.in_progress", {"response": skeleton}),
    ]
    for index, item in enumerate(body.get("output") or []):
        payloads.extend(item_events(index, item))
    final = "response.incomplete" if body.get("status") == "incomplete" else "response.completed"
    payloads.append((final, {"response": dict(body)}))
    return [
        (name, compact_json({"type": name, "sequence_number": seq, **payload}))
        for seq, (name, payload) in enumerate(payloads)
    ]


def item_events(index: int, item: Mapping[str, Any]) -> list[tuple[str, JsonObject]]:
    kind = item.get("type")
    if kind == "message":
        return _message_events(index, item)
    if kind == "function_call":
        return _call_events(index, item)
    if kind == "reasoning":
        return _reasoning_events(index, item)
    return [("response.output_item.added", {"output_index": index, "item": dict(item)}),
            ("response.output_item.done", {"output_index": index, "item": dict(item)})]


def _message_events(index: int, item: Mapping[str, Any]) -> list[tuple[str, JsonObject]]:
    text = content_text(item.get("content"))
    where = {"item_id": item["id"], "output_index": index, "content_index": 0}
    (part,) = item["content"]
    key = "refusal" if part["type"] == "refusal" else "text"
    name = "response.refusal" if key == "refusal" else "response.output_text"
    extra: JsonObject = {} if key == "refusal" else {"logprobs": []}
    events: list[tuple[str, JsonObject]] = [
        ("response.output_item.added", {"output_index": index, "item": {
            **item, "status": "in_progress", "content": []}}),
        ("response.content_part.added", {**where, "part": {**part, key: ""}}),
    ]
    events.extend((f"{name}.delta", {**where, "delta": delta, **extra})
                  for delta in text_deltas(text))
    events.extend(("response.output_text.annotation.added",
                   {**where, "annotation_index": number, "annotation": annotation})
                  for number, annotation in enumerate(part.get("annotations") or ()))
    events.append((f"{name}.done", {**where, key: text, **extra}))
    events.append(("response.content_part.done", {**where, "part": part}))
    events.append(("response.output_item.done", {"output_index": index, "item": dict(item)}))
    return events


def _call_events(index: int, item: Mapping[str, Any]) -> list[tuple[str, JsonObject]]:
    arguments = str(item.get("arguments") or "")
    where = {"item_id": item["id"], "output_index": index}
    events: list[tuple[str, JsonObject]] = [
        ("response.output_item.added", {"output_index": index, "item": {
            **item, "status": "in_progress", "arguments": ""}}),
    ]
    events.extend(("response.function_call_arguments.delta", {**where, "delta": piece})
                  for piece in chunks(arguments))
    events.append(("response.function_call_arguments.done",
                   {**where, "arguments": arguments, "name": item.get("name")}))
    events.append(("response.output_item.done", {"output_index": index, "item": dict(item)}))
    return events


def _reasoning_events(index: int, item: Mapping[str, Any]) -> list[tuple[str, JsonObject]]:
    summary = content_text(item.get("summary"))
    where = {"item_id": item["id"], "output_index": index, "summary_index": 0}
    part = {"type": "summary_text", "text": summary}
    events: list[tuple[str, JsonObject]] = [
        ("response.output_item.added", {"output_index": index, "item": {**item, "summary": []}}),
        ("response.reasoning_summary_part.added", {**where, "part": {**part, "text": ""}}),
    ]
    events.extend(("response.reasoning_summary_text.delta", {**where, "delta": delta})
                  for delta in text_deltas(summary))
    events.append(("response.reasoning_summary_text.done", {**where, "text": summary}))
    events.append(("response.reasoning_summary_part.done", {**where, "part": part}))
    events.append(("response.output_item.done", {"output_index": index, "item": dict(item)}))
    return events
