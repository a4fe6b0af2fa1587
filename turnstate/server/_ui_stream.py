"""The Vercel AI SDK's UI message stream protocol (``x-vercel-ai-ui-message-stream: v1``):
a turn's events as its chunks, and stored messages as its ``UIMessage`` objects.

Nothing here does IO. ``UiStream`` turns one turn's logged events (type and JSON data,
as a live or resumed turn yields them) into chunks: ``start`` (the
message id is the turn id, so a resumed stream names the same message), ``start-step``
/ ``finish-step`` around each provider request of a tool loop, ``text-*`` and
``reasoning-*`` runs, ``tool-input-available`` then ``tool-output-available`` (or
``tool-output-error``), turnstate's own events as ``data-*`` parts (``data-state``
transient; ``data-degradation``, ``data-fallback``, ``data-context`` and, last,
``data-turn`` with the strategy, path, outcome and stats), the answer's sources as
``source-url`` chunks (the http(s) URLs its citations name, each once, in the order
cited: ``source_urls``) before its last ``finish-step``, then ``finish`` (its
``finishReason`` the turn's, in the SDK's words: ``FINISH_REASONS``). An aborted
turn sends ``data-turn``, an ``error`` chunk with the reason in words (``abort`` when it
was cancelled or stopped) and ``finish`` with ``finishReason: "error"``.

``ui_message`` is the same message from the store, so a client that loads a chat's
history sees what it saw streaming (the transient and progress parts aside). An image
the model generated is a ``file`` chunk when it streams, its bytes a ``data:`` URL (the
answer's message and part are not stored yet); read back, the same ``file`` part names
the media route, as a user's attachment does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from turnstate.core import MediaRef
from turnstate.core._citations import Citation, cited_urls
from turnstate.core._conversation import (
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    citations_after_tools,
)
from turnstate.core._json import json_problem, loads_strict
from turnstate.server._views import part_path
from turnstate.storage import LeanMessage
from turnstate.storage._lean import lean_message

Chunk = dict[str, Any]
HEADERS = {"x-vercel-ai-ui-message-stream": "v1"}  # beside a turn stream's (``_sse``)
ABORT_TEXT = {  # every abort reason of the table's (a test holds it), and the sweeps'
    "provider_failed": "the provider returned an error",
    "tool_iteration_limit": "the model kept calling tools past the limit",
    "commit_conflict": "the chat changed while the turn ran",
    "commit_failed": "the answer could not be saved",
    "context_overflow": "the conversation no longer fits the model's context window",
    "deadline_exceeded": "the turn ran past its time limit",
    "internal_error": "the server failed while running the turn",
    "lease_lost": "another request took the chat over while the turn ran",
    "storage_failed": "the database failed while the turn ran",
    "lease_expired": "the server running the turn stopped before it ended",
    "released": "an operator released the chat while the turn ran",
    "tool_result_cursor_loss": ("the provider lost the conversation while tool results "
                                "were on their way"),
}


def tool_input(arguments: str) -> Any:
    """A tool call's arguments (or a result's output) as the JSON value it holds, or
    the text itself when it is not JSON the browser reads: not JSON, ``NaN``, an
    infinity (``1e999`` too), or nested past ``json_problem``'s depth (which
    ``json.dumps`` would write as ``NaN`` / ``Infinity``, or not read at all)."""
    try:
        value = loads_strict(arguments)
    except (ValueError, RecursionError):
        return arguments
    return value if json_problem(value) is None else arguments


def turn_data(kind: str, data: dict[str, Any]) -> Chunk:
    """The ``data-turn`` chunk: how the turn went, from its final event."""
    path = data.get("path") or []
    return {"type": "data-turn", "id": "turn", "data": {
        "turnId": data.get("turnId"), "strategy": data.get("strategy"),
        "path": [path[0]["source"], *(step["dest"] for step in path)] if path else [],
        "outcome": "completed" if kind == "turn_completed" else "aborted",
        "reason": data.get("reason"), "degradation": data.get("degradation")}}


FINISH_REASONS = {"stop": "stop", "length": "length", "content_filter": "content-filter",
                  "refusal": "content-filter", "other": "other"}
"""A completed turn's ``finishReason`` (``core._events.FINISH_REASONS``) as the SDK's
``finish`` chunk names it (a refusal is the provider's content filter at work)."""

_DATA_PARTS = {"continuation_degraded": "data-degradation", "fallback_notice": "data-fallback"}


class UiStream:
    """One turn's events in (their type and JSON data, as the turn's event log holds
    them), UI message stream chunks out (see the module docstring)."""

    def __init__(self, message_id: str) -> None:
        self._message_id = message_id
        self._open: tuple[str, str] | None = None  # ("text" | "reasoning", id)
        self._count = 0
        self._step_open = False
        self._after_results = False
        self._answer: list[str] = []  # text deltas since the last tool result (``_rest``)
        self._calls: set[str] = set()  # the tool calls sent (a result needs its call)

    def start(self) -> list[Chunk]:
        return [{"type": "start", "messageId": self._message_id}]

    def chunks(self, kind: str, data: dict[str, Any]) -> list[Chunk]:
        """The chunks an event becomes (none for events the protocol has no use for)."""
        if kind in ("text_delta", "reasoning_delta"):
            run = "text" if kind == "text_delta" else "reasoning"
            if run == "text":
                self._answer.append(data["text"])
            return [*self._run(run), {"type": f"{run}-delta", "id": self._id(),
                                      "delta": data["text"]}]
        if kind == "image_output":  # a generated image, whole: a file part of the step
            url = f"data:{data['mediaType']};base64,{data['data']}"
            return [*self._step(), *self._close(),
                    {"type": "file", "mediaType": data["mediaType"], "url": url}]
        if kind == "tool_call":
            self._calls.add(data["callId"])
            return [*self._step(), *self._close(), {
                "type": "tool-input-available", "toolCallId": data["callId"],
                "toolName": data["name"], "input": tool_input(data["arguments"])}]
        if kind == "tool_result":
            self._after_results = True
            self._answer.clear()
            if data["callId"] not in self._calls:  # its call came before this stream
                return []  # began (a follower's join): the SDK refuses the whole message
            if data.get("isError"):
                return [{"type": "tool-output-error", "toolCallId": data["callId"],
                         "errorText": data["output"]}]
            return [{"type": "tool-output-available", "toolCallId": data["callId"],
                     "output": tool_input(data["output"])}]
        if kind in ("turn_completed", "turn_aborted"):
            return self._end(kind, data)
        if kind == "state_changed":
            return [{"type": "data-state", "data": data, "transient": True}]
        if kind in _DATA_PARTS:
            return [{"type": _DATA_PARTS[kind], "data": data}]
        if kind == "context_snapshot":
            return [{"type": "data-context", "id": "context", "data": data["snapshot"]}]
        return []

    def _id(self) -> str:
        assert self._open is not None
        return self._open[1]

    def _step(self) -> list[Chunk]:
        """``start-step`` before a provider request's first output (and ``finish-step``
        for the previous one, once tool results went back)."""
        out: list[Chunk] = []
        if self._step_open and self._after_results:
            out += [*self._close(), {"type": "finish-step"}]
            self._step_open = False
        if not self._step_open:
            out.append({"type": "start-step"})
            self._step_open, self._after_results = True, False
        return out

    def _run(self, kind: str) -> list[Chunk]:
        out = self._step()
        if self._open is not None and self._open[0] == kind:
            return out
        out += self._close()
        self._count += 1
        self._open = (kind, f"{self._message_id}-{self._count}")
        return [*out, {"type": f"{kind}-start", "id": self._open[1]}]

    def _close(self) -> list[Chunk]:
        if self._open is None:
            return []
        kind, run_id = self._open
        self._open = None
        return [{"type": f"{kind}-end", "id": run_id}]

    def _rest(self, data: dict[str, Any]) -> list[Chunk]:
        """The answer's text the deltas did not bring: a log past its cap keeps only the
        final event, so a stream read from it (a resume, the transport's reconnect) got
        no deltas, or only the first ones. ``turn_completed`` carries the text after the
        last tool result; what it has beyond the deltas seen since then is sent as one
        delta. Text that does not continue them is left alone (nothing is sent twice)."""
        final, seen = data.get("text"), "".join(self._answer)
        if not isinstance(final, str) or len(final) <= len(seen) or not final.startswith(seen):
            return []
        return [*self._run("text"), {"type": "text-delta", "id": self._id(),
                                     "delta": final[len(seen):]}]

    def _end(self, kind: str, data: dict[str, Any]) -> list[Chunk]:
        out = self._rest(data) if kind == "turn_completed" else []
        out += self._close()
        if kind == "turn_completed" and data.get("citations"):
            out += source_urls(_cited(data["citations"]))
        if self._step_open:
            out.append({"type": "finish-step"})
            self._step_open = False
        out.append(turn_data(kind, data))
        if kind == "turn_completed":
            reason = FINISH_REASONS.get(str(data.get("finishReason")), "stop")
            return [*out, {"type": "finish", "finishReason": reason}]
        reason = str(data.get("reason"))
        if reason in ("cancelled", "stopped"):
            return [*out, {"type": "abort", "reason": reason}]
        words = ABORT_TEXT.get(reason, reason)
        detail = f" ({data['detail']})" if data.get("detail") else ""
        return [*out, {"type": "error", "errorText": f"Aborted: {words}{detail}"},
                {"type": "finish", "finishReason": "error"}]


def _cited(items: Any) -> list[Citation]:
    """A ``turn_completed``'s citations (JSON, camelCase) as records: url and title, the
    only fields a ``source-url`` takes; anything else left out."""
    return [Citation(kind="", url=item.get("url") if isinstance(item.get("url"), str) else None,
                     title=item.get("title") if isinstance(item.get("title"), str) else None)
            for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def source_urls(citations: Iterable[Citation]) -> list[Chunk]:
    """The ``source-url`` chunks (and UI parts: the same shape) of an answer's sources:
    each http(s) URL its citations name once (``core._citations.cited_urls``), with the
    first title given for it; ids ``source-1``, ``source-2``, ... in that order."""
    out: list[Chunk] = []
    for number, (url, title) in enumerate(cited_urls(citations), 1):
        chunk: Chunk = {"type": "source-url", "sourceId": f"source-{number}", "url": url}
        if title is not None:
            chunk["title"] = title
        out.append(chunk)
    return out


def sse(chunk: Chunk | str) -> bytes:
    """One SSE ``data:`` frame (``[DONE]`` ends the stream)."""
    text = chunk if isinstance(chunk, str) else json.dumps(chunk, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


# --- stored messages as UIMessage objects ---------------------------------------------


def _parts(message: LeanMessage) -> Iterator[dict[str, Any]]:
    """The UI parts a stream of these stored parts reconstructs (data parts aside); a
    generated image is its ``file`` part (``ui_file``: the media route's path)."""
    parts = message.parts
    results = {p.call_id: p for p in parts if isinstance(p, ToolResultPart)}
    step, after_results = False, False
    for index, part in enumerate(parts):
        if isinstance(part, TextPart | ReasoningPart | ToolCallPart | MediaRef) and (
                not step or after_results):
            if isinstance(part, ReasoningPart) and not part.text:
                continue
            yield {"type": "step-start"}
            step, after_results = True, False
        if isinstance(part, TextPart):
            yield {"type": "text", "text": part.text, "state": "done"}
        elif isinstance(part, ReasoningPart) and part.text:
            yield {"type": "reasoning", "text": part.text, "state": "done"}
        elif isinstance(part, ToolCallPart):
            yield _tool_part(part, results.get(part.call_id))
        elif isinstance(part, MediaRef):
            yield ui_file(message, index, part)
        elif isinstance(part, ToolResultPart):
            after_results = True


def _tool_part(call: ToolCallPart, result: ToolResultPart | None) -> dict[str, Any]:
    base = {"type": f"tool-{call.name}", "toolCallId": call.call_id,
            "input": tool_input(call.arguments)}
    if result is None:
        return {**base, "state": "input-available"}
    if result.is_error:
        return {**base, "state": "output-error", "errorText": result.output}
    return {**base, "state": "output-available", "output": tool_input(result.output)}


def _joined(parts: Iterator[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive text (or reasoning) parts of one step are one run in a stream."""
    out: list[dict[str, Any]] = []
    for part in parts:
        if out and part["type"] in {"text", "reasoning"} and out[-1]["type"] == part["type"]:
            out[-1] = {**out[-1], "text": out[-1]["text"] + part["text"]}
        else:
            out.append(part)
    return out


def ui_message(message: LeanMessage | Message,
               turn: dict[str, Any] | None = None) -> dict[str, Any]:
    """A stored message as a ``UIMessage``: a user message by its stored id (never given
    to another message: ``_ui_ids``), an answer by its turn id (the id its stream started
    with), with the turn's ``data-turn`` part. Read
    lean (``Store.list_messages_lean``), so an image's or PDF's bytes are never read:
    an inline one is the URL of the route that serves them (``ui_file``)."""
    if isinstance(message, Message):
        message = lean_message(message)
    if message.role.value == "user":
        return {"id": message.id, "role": "user",
                "parts": [{"type": "text", "text": message.text()},
                          *(ui_file(message, index, p) for index, p in enumerate(message.parts)
                            if isinstance(p, MediaRef))]}
    parts = _joined(_parts(message))
    parts += source_urls(citations_after_tools(
        p for p in message.parts if not isinstance(p, MediaRef)))
    if turn is not None:
        parts.append({"type": "data-turn", "id": "turn", "data": turn})
    return {"id": turn["turnId"] if turn else message.id, "role": "assistant", "parts": parts}


def ui_file(message: LeanMessage, index: int, part: MediaRef) -> dict[str, Any]:
    """A stored image or PDF as a ``file`` UI part: an inline one's ``url`` is the path of
    ``GET /api/chats/{id}/messages/{seq}/parts/{index}`` (relative to the server, fetched
    with the bearer token, as the chat view's ``src``), never its bytes as a ``data:`` URL;
    a URL part keeps its https URL."""
    url = part.url if part.size is None else part_path(message.chat_id, message.seq, index)
    shown: dict[str, Any] = {"type": "file", "mediaType": part.media_type or "image/*",
                             "url": url}
    if part.filename is not None:
        shown["filename"] = part.filename
    return shown
