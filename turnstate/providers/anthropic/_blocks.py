"""Anthropic Messages requests: top-level system, content blocks, thinking in the loop.

Rendering rules:

* ``system`` is top level (left out when empty); ``messages`` hold content blocks, and
  consecutive messages of one role are merged (their blocks concatenated) so roles
  alternate;
* a user message is ``[{"type": "text", "text": ...}]``, or its text, image and
  document blocks; text of whitespace only is left out beside an image or a file and
  sent as ``BLANK_USER_TEXT`` alone (the API refuses it, and the message must stay);
* an assistant message's parts are split at tool-result boundaries: each segment
  becomes an assistant message: its thinking blocks first (the API wants a tool-loop
  message to start with thinking), then its other blocks in the order the model made
  them (``text`` with consecutive text parts joined, ``tool_use`` blocks
  ``{id, name, input}``, server-tool blocks; an id another provider made outside
  Anthropic's ``^[a-zA-Z0-9_-]+$`` is rewritten, ``tool_id``), followed by one user message of
  ``tool_result`` blocks ``{tool_use_id, content, is_error}``. Text of whitespace only
  is no text (the API refuses such a block); a segment with no text, no call and no
  server-tool block is left out;
* ``thinking`` / ``redacted_thinking`` blocks go back complete and unchanged (text and
  signature, or data), only to the provider and model that made them: inside this
  turn's tool loop always; in earlier, completed turns only to a model that keeps them
  in context (``ReasoningReplay.ALL``: Claude Opus 4.5 and later), where the history's
  assistant messages render as the loop rendered them (opaque blocks still left out);
  other models ignore them there, and leaving them out keeps the history's bytes stable;
* opaque blocks (server tools: ``server_tool_use``, ``web_search_tool_result``, ...)
  follow the same rule as thinking, verbatim, at their place;
* tools ``{name, description, input_schema}`` are sorted by name, schema keys sorted.

``extend_loop`` renders with the same ``render_parts_blocks`` as the history. As in
the Chat Completions codec, messages are written as compact JSON text directly (the
body is their join) and the loop's dicts are ``json.loads`` of the same text. A call's
``input`` is written by ``_tool_input``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

from turnstate.core._compaction import COMPACTION_KIND, same_model
from turnstate.core._conversation import (
    Message,
    OpaquePart,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from turnstate.core._json import JsonObject
from turnstate.core._media import ImagePart
from turnstate.core._media_output import answer_image_text
from turnstate.core._registry import ModelInfo, ReasoningReplay
from turnstate.providers._opaque import replayable
from turnstate.providers._tool_calls import id_hash
from turnstate.providers.anthropic._compaction import compaction_block
from turnstate.providers.anthropic._tool_input import tool_input, tool_input_json
from turnstate.providers.anthropic._user_blocks import user_json, user_text_block
from turnstate.providers.chat_completions._codec import (
    USER_ROLE,
    canonical_schema,
    dumps_compact,
    quote,
)

__all__ = ["OPENINGS", "compacted_head", "history_messages", "loop_blocks", "merge_roles",
           "push_history", "push_message", "render_parts", "render_parts_blocks", "render_tools",
           "tool_input", "tool_input_json"]

ALL_REASONING = ReasoningReplay.ALL  # looked up once: enum attribute access is slow
THINKING_KINDS = frozenset({"thinking", "redacted_thinking"})


def render_tools(tools: Iterable[ToolSpec]) -> list[JsonObject]:
    """``[{name, description, input_schema}]`` sorted by name, schemas canonical."""
    out: list[JsonObject] = []
    for spec in sorted(tools, key=lambda t: t.name):
        tool: JsonObject = {"name": spec.name}
        if spec.description:
            tool["description"] = spec.description
        schema = spec.parameters  # the API requires input_schema.type, "object"; a
        if "type" not in schema:  # ToolSpec may leave it out (the other wires take that)
            schema = {"type": "object", **schema}
        tool["input_schema"] = canonical_schema(schema)
        out.append(tool)
    return out


Blocks = list[str]
"""A message's content blocks, each as compact JSON text."""


def text_block(text: str) -> str:
    return f'{{"type":"text","text":{quote(text)}}}'


def thinking_block(part: ReasoningPart) -> str:
    if part.kind == "redacted_thinking":
        return f'{{"type":"redacted_thinking","data":{quote(part.data or "")}}}'
    return (f'{{"type":"thinking","thinking":{quote(part.text)},'
            f'"signature":{quote(part.signature or "")}}}')


_TOOL_ID = re.compile(r"[A-Za-z0-9_-]+").fullmatch


def tool_id(call_id: str) -> str:
    """``call_id`` as Anthropic takes it: unchanged inside ``^[a-zA-Z0-9_-]+$`` (an ASCII
    identifier, the usual id, fits with no regex); another provider's (Kimi's
    ``functions.name:0``) with its other characters as ``_`` and 12 hex of its SHA-256
    (``id_hash``), alike for the call and its result."""
    if (call_id.isascii() and call_id.isidentifier()) or _TOOL_ID(call_id):
        return call_id
    return f"{re.sub(r'[^A-Za-z0-9_-]', '_', call_id)}_{id_hash(call_id, 12)}"


def tool_use_block(part: ToolCallPart) -> str:
    return (f'{{"type":"tool_use","id":{quote(tool_id(part.call_id))},"name":{quote(part.name)},'
            f'"input":{tool_input_json(part.arguments)}}}')


def tool_result_block(part: ToolResultPart) -> str:
    return (f'{{"type":"tool_result","tool_use_id":{quote(tool_id(part.call_id))},'
            f'"content":{quote(part.output)},"is_error":{"true" if part.is_error else "false"}}}')


def _assistant(thinking: Blocks, blocks: Blocks, said: bool) -> tuple[str, Blocks] | None:
    """A segment's assistant message, its thinking first (the API wants an assistant
    message of a tool loop to start with it); None when it holds only thinking."""
    return ("assistant", [*thinking, *blocks]) if said else None


def _text_into(blocks: Blocks, text: list[str]) -> bool:
    """Consecutive text parts as one block at their place; True when there was text.
    Whitespace alone is no text: the API refuses a text block of it ("text content
    blocks must contain non-whitespace text"), and Claude does answer ``"\n\n"``."""
    content = "".join(text)
    text.clear()
    if not content or content.isspace():
        return False
    blocks.append(text_block(content))
    return True


def _kept_thinking(part: Part, keep: tuple[str, str] | None) -> str | None:
    if (keep is not None and type(part) is ReasoningPart and part.kind in THINKING_KINDS
            and part.provider == keep[0] and same_model(part.model, keep[1])):
        return thinking_block(part)
    return None


def _block(part: Part, keep: tuple[str, str] | None) -> str | None:
    """A call or a kept opaque block as a block; else None."""
    if type(part) is ToolCallPart:
        return tool_use_block(part)
    if keep is not None and type(part) is OpaquePart:
        block = replayable(part, *keep)
        if block is not None and part.kind == COMPACTION_KIND:
            block = compaction_block(part)
        return None if block is None else dumps_compact(block)
    return None


def render_parts_blocks(
    parts: Sequence[Part], keep: tuple[str, str] | None
) -> list[tuple[str, Blocks]]:
    """An assistant message's parts as ``(role, blocks)`` messages, in order.

    Each segment (up to its tool results) starts with its kept thinking blocks, then
    keeps its other blocks in the order the model made them: consecutive text parts
    join into one block, so text after a call stays after it. ``keep`` is the
    ``(provider, model)`` whose thinking and opaque blocks are sent back; None sends none.
    """
    out: list[tuple[str, Blocks]] = []
    thinking: Blocks = []
    blocks: Blocks = []
    text: list[str] = []
    results: Blocks = []
    said = False  # the segment has a text, call or opaque block (not only thinking)
    for part in parts:
        if type(part) is ToolResultPart:
            results.append(tool_result_block(part))
            continue
        if results:  # a new segment starts after the previous one's results
            message = _assistant(thinking, blocks, _text_into(blocks, text) or said)
            if message is not None:
                out.append(message)
            out.append(("user", results))
            thinking, blocks, results, said = [], [], [], False
        if type(part) is TextPart:
            text.append(part.text)
        elif type(part) is ImagePart:  # generated (Gemini's): no assistant image here
            text.append(answer_image_text(part))
        elif (block := _kept_thinking(part, keep)) is not None:
            thinking.append(block)
        elif (block := _block(part, keep)) is not None:
            if type(part) is OpaquePart and part.kind == COMPACTION_KIND:
                thinking.insert(0, block)  # first, even before thinking: the API drops
            else:                          # every block that precedes it
                _text_into(blocks, text)
                blocks.append(block)
            said = True
    message = _assistant(thinking, blocks, _text_into(blocks, text) or said)
    if message is not None:
        out.append(message)
    if results:
        out.append(("user", results))
    return out


def history_messages(parts: Sequence[Part]) -> list[tuple[str, str]]:
    """``render_parts_blocks(parts, None)`` with each message's blocks joined.

    A completed turn keeps no thinking or opaque block, which leaves only text, calls
    and results to render: this is that case written out, the hot loop of a replay's
    tool turns (a property test holds it to ``render_parts_blocks``).
    """
    out: list[tuple[str, str]] = []
    blocks: Blocks = []
    text: list[str] = []
    results: Blocks = []
    said = False
    for part in parts:
        if type(part) is ToolResultPart:
            results.append(tool_result_block(part))
            continue
        if results:
            if _text_into(blocks, text) or said:
                out.append(("assistant", ",".join(blocks)))
            out.append(("user", ",".join(results)))
            blocks, results, said = [], [], False
        if type(part) is TextPart:
            text.append(part.text)
        elif type(part) is ToolCallPart:
            _text_into(blocks, text)
            blocks.append(tool_use_block(part))
            said = True
    if _text_into(blocks, text) or said:
        out.append(("assistant", ",".join(blocks)))
    if results:
        out.append(("user", ",".join(results)))
    return out


def compacted_head(head: Sequence[Part]) -> list[tuple[str, str]]:
    """The compacting message from its compaction block on (``history_from_compaction``'s
    head): the block, then the rest as a completed turn renders (no thinking, no other
    opaque block)."""
    block = compaction_block(head[0]) if type(head[0]) is OpaquePart else None
    first = [("assistant", dumps_compact(block))] if block is not None else []
    return [*first, *history_messages(head[1:])]


def message_json(role: str, blocks: Blocks) -> str:
    return f'{{"role":{quote(role)},"content":[{",".join(blocks)}]}}'


def render_parts(parts: Sequence[Part], keep: tuple[str, str] | None) -> list[JsonObject]:
    """``render_parts_blocks`` as JSON objects (what the loop carries)."""
    return [json.loads(message_json(role, blocks))
            for role, blocks in render_parts_blocks(parts, keep)]


def loop_blocks(message: JsonObject) -> tuple[str, Blocks]:
    """A loop message (a dict) back as ``(role, blocks)``; string content becomes a block."""
    content = message.get("content")
    if isinstance(content, list):
        return str(message["role"]), [dumps_compact(block) for block in content]
    return str(message["role"]), [text_block(content if isinstance(content, str) else "")]


OPENINGS = {"user": '{"role":"user","content":[',
             "assistant": '{"role":"assistant","content":['}


def push_message(out: list[str], last_role: str, role: str, blocks: str) -> str:
    """Append a message (``blocks``: its blocks joined by commas) to ``out``, merged into
    the previous one when it has the same role; returns the role now last."""
    if role == last_role and out:
        out[-1] = f"{out[-1][:-2]},{blocks}]}}"  # every message ends with ``]}``
    else:
        opening = OPENINGS.get(role) or f'{{"role":{quote(role)},"content":['
        out.append(f"{opening}{blocks}]}}")
    return role


def merge_roles(messages: Iterable[tuple[str, Blocks]]) -> list[str]:
    """Consecutive messages of one role as one message (blocks concatenated), as JSON."""
    out: list[str] = []
    last = ""
    for role, blocks in messages:
        last = push_message(out, last, role, ",".join(blocks))
    return out


def push_history(out: list[str], last: str, history: Sequence[Message],
                 model: ModelInfo) -> str:
    """Append the committed ``history`` to ``out`` (roles merged); returns the last role.
    The hot loop of a replay: plain one-part messages are written inline. A model that
    keeps earlier turns' thinking (``ReasoningReplay.ALL``) gets its own back
    (``_with_thinking``)."""
    keep = (model.provider, model.name) if model.reasoning_replay is ALL_REASONING else None
    for message in history:
        parts = message.parts
        first = parts[0] if len(parts) == 1 else None
        role = message.role
        if role is USER_ROLE or role == "user":
            block = (user_text_block(first.text) if type(first) is TextPart
                     else user_json(parts, model))
            if last == "user":
                last = push_message(out, last, "user", block)
            else:
                out.append(f'{{"role":"user","content":[{block}]}}')
                last = "user"
        elif (type(first) is TextPart and first.text and last != "assistant"
              and not first.text.isspace()):
            out.append(f'{{"role":"assistant","content":[{{"type":"text","text":'
                       f'{quote(first.text)}}}]}}')
            last = "assistant"
        elif keep is not None:
            for kind, blocks in _with_thinking(parts, keep):
                last = push_message(out, last, kind, ",".join(blocks))
        else:
            for kind, joined in history_messages(parts):
                last = push_message(out, last, kind, joined)
    return last


def _with_thinking(parts: Sequence[Part], keep: tuple[str, str]) -> list[tuple[str, Blocks]]:
    """A completed turn's messages with the thinking blocks ``keep``'s model made, as its
    tool loop sent them; its opaque (server-tool) blocks are left out as for any model."""
    return render_parts_blocks([p for p in parts if type(p) is not OpaquePart], keep)
