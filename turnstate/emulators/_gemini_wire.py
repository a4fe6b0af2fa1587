"""Wire shapes the Gemini Interactions emulator speaks: steps as conversation items,
the SSE event sequence and error bodies (providers-wire.md 2.2 to 2.7)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from turnstate.core._json import JsonObject, compact_json
from turnstate.emulators._base import Item, canonical_arguments, text_deltas
from turnstate.emulators._chain import ChainBuilder, ChainView, chain_of
from turnstate.emulators._media import user_item

SERVER_STEP_FIELDS: dict[str, tuple[str, ...]] = {
    "google_search_call": ("id", "arguments"), "google_search_result": ("call_id", "result"),
    "code_execution_call": ("id", "arguments"), "code_execution_result": ("call_id", "result"),
    "url_context_call": ("id", "arguments"), "url_context_result": ("call_id", "result"),
    "google_maps_call": ("id", "arguments"), "google_maps_result": ("call_id", "result"),
    "file_search_call": ("id",), "file_search_result": ("call_id",),
    "mcp_server_tool_call": ("id", "name", "server_name", "arguments"),
    "mcp_server_tool_result": ("call_id", "name", "server_name", "result"),
    "retrieval_call": ("id", "arguments"), "retrieval_result": ("call_id",),
    "tool_search_call": ("id", "arguments"), "tool_search_result": ("call_id", "result"),
    "processing_call": ("id",), "processing_result": ("call_id",),
}
"""Server-tool input steps and their required fields (google-genai's ``*StepParam``
TypedDicts): a step replayed without what its deltas carried is a 400."""
STEP_TYPES = frozenset({"user_input", "model_output", "thought", "function_call",
                        "function_result", *SERVER_STEP_FIELDS})
"""Input step types accepted (server-tool steps go back verbatim in a stateless replay)."""
ARGUMENT_CHUNK = 12


def error_body(code: str, message: str) -> JsonObject:
    """The Interactions error body: ``{"error": {"code": str, "message": str}}``."""
    return {"error": {"code": code, "message": message}}


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, Mapping) and isinstance(block.get("text"), str):
            texts.append(block["text"])
    return "".join(texts)


def result_text(result: Any) -> str:
    """A ``function_result``'s result as text: a string, content parts, or JSON."""
    if isinstance(result, str):
        return result
    if isinstance(result, Mapping) and "content" in result:
        return content_text(result["content"])
    if isinstance(result, list):
        return content_text(result)
    return compact_json(result)


def arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return canonical_arguments(arguments)
    return canonical_arguments(json.dumps(arguments if arguments is not None else {}))


def conversation_items(steps: Iterable[Mapping[str, Any]], prior: Sequence[Item]) -> list[Item]:
    """``prior`` followed by the conversation the steps carry (thoughts carry none)."""
    builder = ChainBuilder(chain_of(prior))
    add_steps(builder, steps)
    return list(ChainView(builder.node()))


def add_steps(builder: ChainBuilder, steps: Iterable[Mapping[str, Any]]) -> None:
    """Append the conversation that input or output steps carry to ``builder``."""
    for step in steps:
        kind = step.get("type")
        if kind == "user_input":
            builder.append(user_item(step.get("content")))
        elif kind == "model_output":
            text = content_text(step.get("content"))
            if text:
                builder.append(Item(kind="assistant", text=text))
        elif kind == "function_call":
            builder.append(Item(kind="tool_call", call_id=str(step.get("id") or ""),
                                name=str(step.get("name") or ""),
                                text=arguments_text(step.get("arguments"))))
        elif kind == "function_result":
            call_id = str(step.get("call_id") or "")
            name = step.get("name") if isinstance(step.get("name"), str) else None
            builder.append(Item(kind="tool_result", call_id=call_id,
                                name=name or builder.name_of(call_id),
                                text=result_text(step.get("result"))))


def signatures_of(steps: Iterable[Mapping[str, Any]]) -> list[str]:
    """The thought signatures that steps carry (on thoughts and function calls)."""
    return [s["signature"] for s in steps if isinstance(s.get("signature"), str)
            and s["signature"]]


# --- streaming -----------------------------------------------------------------------


def stream_events(interaction: Mapping[str, Any]) -> list[tuple[str | None, str]]:
    """The SSE ``(event, data)`` pairs of a finished interaction, in the real order."""
    head = {key: interaction[key] for key in ("id", "object", "model")}
    payloads: list[tuple[str, JsonObject]] = [
        ("interaction.created", {"interaction": {**head, "status": "in_progress"}}),
        ("interaction.status_update", {"interaction_id": interaction["id"],
                                       "status": "in_progress"}),
    ]
    for index, step in enumerate(interaction.get("steps") or []):
        payloads.extend(step_events(index, step))
    completed = {key: value for key, value in interaction.items() if key != "steps"}
    payloads.append(("interaction.completed", {"interaction": completed}))
    events: list[tuple[str | None, str]] = [
        (name, compact_json({**payload, "event_type": name})) for name, payload in payloads
    ]
    events.append(("done", "[DONE]"))
    return events


def step_events(index: int, step: Mapping[str, Any]) -> list[tuple[str, JsonObject]]:
    kind = step.get("type")
    deltas: list[JsonObject] = []
    start: JsonObject = {"type": kind}
    if kind == "model_output":
        deltas = [{"type": "text", "text": piece}
                  for piece in text_deltas(content_text(step.get("content")))]
        deltas += [dict(block) for block in step.get("content") or ()
                   if isinstance(block, Mapping) and block.get("type") == "image"]
        if step.get("signature"):
            deltas.append({"type": "thought_signature", "signature": step["signature"]})
    elif kind == "thought":
        summary = content_text(step.get("summary"))
        if summary:
            deltas.append({"type": "thought_summary", "content": {"type": "text", "text": summary}})
        deltas.append({"type": "thought_signature", "signature": step.get("signature", "")})
    elif kind == "function_call":
        # ``signature`` is optional on a function call (functioncallstep.py): only the
        # first call after a thought carries one, so the others leave the key out.
        start = {"id": step["id"], "type": kind, "name": step["name"], "arguments": {}}
        if step.get("signature"):
            start["signature"] = step["signature"]
        text = compact_json(step.get("arguments") or {})
        deltas = [{"type": "arguments_delta", "arguments": text[i:i + ARGUMENT_CHUNK]}
                  for i in range(0, len(text), ARGUMENT_CHUNK)]
    else:  # server-tool steps arrive whole in step.start
        start = dict(step)
    events: list[tuple[str, JsonObject]] = [("step.start", {"index": index, "step": start})]
    events.extend(("step.delta", {"index": index, "delta": delta}) for delta in deltas)
    events.append(("step.stop", {"index": index}))
    return events
