"""The compact JSON fragments a Chat Completions request is written from (``_codec``
renders a request with them; Anthropic's codec borrows ``quote``, ``dumps_compact``,
``join_body`` and ``canonical_schema``): tools, an assistant message's parts under a
``ReasoningPolicy``, a user message's content, and the body's join.

Speed: a replay serialises the whole history on every request, so the renderer writes
each message's compact JSON text directly (strings escaped by the C escaper that
``compact_json`` itself uses) instead of building dicts for ``json.dumps``; the body is
those fragments joined. ``render_parts`` (dicts) is ``json.loads`` of the same text,
and ``compact_json`` of a rendered dict gives back exactly its fragment.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from json.encoder import encode_basestring
from typing import Any

import attrs

from turnstate.core._compaction import same_model
from turnstate.core._content import for_model
from turnstate.core._conversation import (
    Part,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from turnstate.core._json import JsonObject, canonical_json
from turnstate.core._media import ImagePart
from turnstate.core._media_output import answer_image_text
from turnstate.core._registry import ModelInfo
from turnstate.core._text import utf8
from turnstate.providers._media import chat_content, plain_text
from turnstate.providers._tool_calls import shortened_call_id

quote = encode_basestring
"""A JSON string literal exactly as ``compact_json`` writes it (``ensure_ascii=False``)."""

dumps_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False,
                                 allow_nan=False).encode
"""``compact_json`` with its encoder built once (``json.dumps`` with options builds a new
encoder per call, which costs more than encoding a small object)."""

ReasoningRule = Callable[[str, bool], str | None]
"""``(the segment's reasoning text, whether it made tool calls)`` → the value of
``reasoning_content`` on its assistant message, or None to leave the key out."""


@attrs.frozen(kw_only=True)
class ReasoningPolicy:
    """How one request renders reasoning: ``rule`` (None: never), applied only to
    reasoning parts that ``provider`` made, and ``model`` too unless ``any_model``
    (this turn's loop: what the provider returned goes back whatever model name the
    response carried)."""

    rule: ReasoningRule | None
    provider: str = ""
    model: str = ""
    any_model: bool = False

    def sends(self, part: ReasoningPart) -> bool:
        """Whether ``part``'s text is rendered under this policy."""
        if self.rule is None or part.provider != self.provider:
            return False
        return self.any_model or part.model == self.model or same_model(part.model, self.model)


NO_REASONING = ReasoningPolicy(rule=None)


def canonical_schema(schema: Mapping[str, Any]) -> JsonObject:
    """A JSON schema with its keys sorted recursively (a stable rendering)."""
    value: JsonObject = json.loads(canonical_json(schema))
    return value


def render_tools(tools: Iterable[ToolSpec]) -> list[JsonObject]:
    """``[{"type": "function", "function": {name, description, parameters}}]`` by name."""
    out: list[JsonObject] = []
    for spec in sorted(tools, key=lambda t: t.name):
        function: JsonObject = {"name": spec.name}
        if spec.description:
            function["description"] = spec.description
        function["parameters"] = canonical_schema(spec.parameters)
        out.append({"type": "function", "function": function})
    return out


MAX_CALL_ID = 40
"""The longest ``tool_calls[].id`` / ``tool_call_id`` OpenAI takes ("string too long.
Expected a string with maximum length 40", code ``string_above_max_length``)."""


def call_id_json(call_id: str) -> str:
    """A call id as a JSON string, shortened past ``MAX_CALL_ID`` alike for the call and
    its result (``shortened_call_id``)."""
    return quote(shortened_call_id(call_id, MAX_CALL_ID))


def tool_call_json(part: ToolCallPart) -> str:
    return (f'{{"id":{call_id_json(part.call_id)},"type":"function","function":{{"name":'
            f'{quote(part.name)},"arguments":{quote(part.arguments)}}}}}')


def _assistant(
    text: list[str], calls: list[str], thought: list[str], rule: ReasoningRule | None
) -> str | None:
    content = "".join(text)
    if not content and not calls:
        return None
    head = f'{{"role":"assistant","content":{quote(content) if content else "null"}'
    middle = f',"tool_calls":[{",".join(calls)}]' if calls else ""
    value = rule("".join(thought), bool(calls)) if rule is not None else None
    tail = "}" if value is None else f',"reasoning_content":{quote(value)}}}'
    return f"{head}{middle}{tail}"


def _plain_tail(rule: ReasoningRule | None) -> str:
    """How a plain-text assistant message (no calls, no reasoning) ends under ``rule``."""
    value = rule("", False) if rule is not None else None
    return "}" if value is None else f',"reasoning_content":{quote(value)}}}'


def render_parts_json(parts: Sequence[Part], policy: ReasoningPolicy) -> list[str]:
    """An assistant message's parts as assistant and ``tool`` messages (compact JSON), in order."""
    rule = policy.rule
    first = parts[0] if len(parts) == 1 else None
    if type(first) is TextPart:  # the common case: a plain answer
        if not first.text:
            return []
        return [f'{{"role":"assistant","content":{quote(first.text)}{_plain_tail(rule)}']
    out: list[str] = []
    text: list[str] = []
    calls: list[str] = []
    thought: list[str] = []
    results: list[str] = []
    for part in parts:
        if type(part) is ToolResultPart:
            results.append(f'{{"role":"tool","tool_call_id":{call_id_json(part.call_id)},'
                           f'"content":{quote(part.output)}}}')
            continue
        if results:  # a new segment starts after the previous one's results
            message = _assistant(text, calls, thought, rule)
            if message is not None:
                out.append(message)
            out += results
            text, calls, thought, results = [], [], [], []
        if type(part) is TextPart:
            text.append(part.text)
        elif type(part) is ImagePart:  # generated (Gemini's): no assistant image here
            text.append(answer_image_text(part))
        elif type(part) is ToolCallPart:
            calls.append(tool_call_json(part))
        elif type(part) is ReasoningPart and policy.sends(part):
            thought.append(part.text)
    message = _assistant(text, calls, thought, rule)
    if message is not None:
        out.append(message)
    out += results
    return out


def render_parts(parts: Sequence[Part], policy: ReasoningPolicy) -> list[JsonObject]:
    """``render_parts_json`` as JSON objects (what the loop carries)."""
    return [json.loads(text) for text in render_parts_json(parts, policy)]


def user_content_json(parts: Sequence[Part], model: ModelInfo) -> str:
    """A user message's ``content`` (JSON): its text as a string, or text, ``image_url``
    and ``file`` parts as ``model`` takes them (``providers._media``)."""
    parts = for_model(parts, model)
    text = plain_text(parts)
    return quote(text) if text is not None else dumps_compact(chat_content(parts))


def join_body(head: str, items: list[Any], tail: str) -> bytes:
    """``(head + ",".join(items) + tail).encode()`` (``items`` are consumed).

    A replay body is megabytes, and this is where its memory is spent: a chain of ``+``
    resizes the big string in place and encoding a joined string copies it again. Each
    fragment is encoded in place instead (its text freed at once), then the bytes are
    joined once, which keeps the peak near twice the body's size. A fragment UTF-8
    cannot encode (history stored with lone surrogates) is ``mended`` first.
    """
    if not items:
        return utf8(head + tail)
    items[0] = head + items[0]
    items[-1] += tail
    for index, item in enumerate(items):
        try:  # no call added per fragment: a try costs nothing until it catches
            items[index] = item.encode("utf-8")
        except UnicodeEncodeError:
            items[index] = utf8(item)
    del item  # the last fragment's text (a turn's image) is not held through the join
    return b",".join(items)


USER_ROLE = Role.USER  # looked up once: enum attribute access is slow in a hot loop
