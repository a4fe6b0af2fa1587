"""The protocol-neutral conversation of the emulators and their scripted "model".

``Item`` is one conversation item in neutral form (what a cursor stands for, or the
committed history, reduced for comparison); ``ScriptedModel`` answers a conversation
deterministically, following directives written in the user's text (``Directive``).
"""

from __future__ import annotations

import json
import math
import re
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from turnstate.core._conversation import (
    Message,
    Part,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from turnstate.core._json import JsonObject, canonical_json, compact_json
from turnstate.core._media import FilePart, ImagePart, describe
from turnstate.emulators._forced import (
    NO_TOOL_TEXT,
    ScriptedCall,
    example_arguments,
    forced_calls,
)
from turnstate.emulators._structured import structured_text

_DIRECTIVE = re.compile(r"\[\[(\w+)(?::([^\]\s*]+))?(?:\*(\d+))?(?:\s+(\{.*?\}))?\]\]")


@attrs.frozen(kw_only=True)
class Directive:
    """An instruction to the scripted model, written in the user's text.

    ``[[call:NAME]]`` calls tool NAME with arguments derived from its schema;
    ``[[call:NAME {"city": "Paris"}]]`` with these arguments; ``[[call:NAME*3]]`` three
    parallel calls. ``[[think]]`` adds reasoning. ``[[rounds:N]]`` repeats the calls for
    N tool iterations before answering (default 1). ``[[say:TEXT]]`` fixes the reply.

    Shapes of the wire corpus, each emulator in its own wire format:
    ``[[search:QUERY]]`` runs a server-side web search before the turn's first reply
    (OpenAI ``web_search_call``, Anthropic ``server_tool_use`` + ``web_search_tool_result``,
    Gemini ``google_search_call`` / ``_result``; Chat Completions has none);
    ``[[refuse]]`` answers with a refusal instead of text; ``[[cutoff]]`` stops the
    answer at the token limit (half its words; ``incomplete`` / ``max_tokens`` /
    ``length``); ``[[cite:URL]]`` (OpenAI Responses only) cites URL for the whole answer
    (a ``url_citation`` annotation, streamed as ``output_text.annotation.added``; one
    directive per URL). ``[[image]]`` (Gemini only; ``[[image*N]]`` for N) generates an
    image after the answer's text (``emulators._media.generated_png``). Underscores in
    TEXT and QUERY stand for spaces. ``[[settings]]`` answers
    with the request's generation settings as JSON (``emulators._settings``), and any
    answer stops at the request's ``max_output_tokens`` words. With structured output
    asked (a JSON ``response_format`` of any of the wires) the answer is JSON: TEXT of
    ``[[say:TEXT]]`` when it is JSON, else a minimal instance of the schema
    (``emulators._structured``).
    """

    name: str
    value: str | None = None
    count: int = 1
    arguments: JsonObject | None = None


def _not_json(token: str) -> float:
    """``json.loads``' hook for what JSON has no number for (``NaN``, ``Infinity``,
    ``1e999``): a ``ValueError``, as any other text that is not JSON."""
    msg = f"{token!r} is not a JSON number"
    raise ValueError(msg)


def _finite(text: str) -> float:
    number = float(text)
    return number if math.isfinite(number) else _not_json(text)


def parse_directives(text: str) -> tuple[Directive, ...]:
    """The directives of ``text``; a ``[[call:NAME {...}]]`` whose arguments are not JSON
    (``NaN`` and ``1e999`` included, which the wire cannot carry: a 500 before) calls the
    tool with its schema's example arguments, as one without any."""
    found = []
    for match in _DIRECTIVE.finditer(text):
        name, value, count, args = match.groups()
        try:
            arguments = (json.loads(args, parse_constant=_not_json, parse_float=_finite)
                         if args else None)
        except (ValueError, RecursionError):
            arguments = None
        found.append(Directive(name=name, value=value, count=int(count or 1),
                               arguments=arguments if isinstance(arguments, dict) else None))
    return tuple(found)


@attrs.frozen(kw_only=True)
class Item:
    """One item of a conversation in neutral form, as an emulator reconstructs it.

    ``kind`` is ``user``, ``assistant``, ``tool_call`` or ``tool_result``.
    """

    kind: str
    text: str = ""
    call_id: str = ""
    name: str = ""
    media: tuple[str, ...] = ()
    """A user item's images and files, described (``core._media.describe``)."""


REFUSAL = "I'm sorry, but I can't help with that."


@attrs.frozen(kw_only=True)
class Reply:
    """What the scripted model says: optional reasoning, text and tool calls.

    ``search`` is the query of a server-side search that ran first; ``refusal`` is said
    instead of ``text``; ``truncated`` means the output stopped at the token limit, and
    ``partial_call`` (with ``truncated``) that it stopped inside the last call's arguments
    (the Anthropic emulator streams only part of that ``tool_use`` input and counts the
    call as incomplete; the others send the call whole).
    """

    text: str
    reasoning: str | None = None
    calls: tuple[ScriptedCall, ...] = ()
    search: str | None = None
    refusal: str | None = None
    truncated: bool = False
    partial_call: bool = False
    sources: tuple[str, ...] = ()
    """The URLs the answer cites (``[[cite:URL]]``)."""
    images: int = 0
    """How many images the answer generates (``[[image]]``, ``[[image*2]]``; Gemini only)."""


class ScriptedModel:
    """A deterministic model: answers are derived from the conversation alone.

    Tests may also queue explicit ``Reply`` values with ``push``; they win over directives.
    """

    def __init__(self) -> None:
        self._queued: deque[Reply] = deque()

    def push(self, *replies: Reply) -> None:
        self._queued.extend(replies)

    def respond(self, items: Sequence[Item], tools: Mapping[str, Mapping[str, Any]],
                settings: Mapping[str, Any] | None = None) -> Reply:
        """Reply to ``items`` given the ``tools`` offered (name → JSON schema) and the
        request's generation ``settings`` (``emulators._settings.wire_settings``); a
        forced or refused ``tool_choice`` is obeyed (``emulators._forced``)."""
        settings = settings or {}
        choice = settings.get("tool_choice")
        reply = self._respond(items, {} if choice == "none" else tools, settings)
        forced = forced_calls(reply.calls, tools, choice)
        if forced is not None:
            reply = _obeyed(reply, forced)
        return _limited(reply, settings.get("max_output_tokens"))

    def _respond(self, items: Sequence[Item], tools: Mapping[str, Mapping[str, Any]],
                 settings: Mapping[str, Any]) -> Reply:
        if self._queued:
            return self._queued.popleft()
        # From the end: a chained conversation is read back only as far as the turn's
        # user item, however long the chain before it (``_chain.ChainView``).
        back = next((n for n, it in enumerate(reversed(items)) if it.kind == "user"), None)
        user_index = len(items) - 1 - back if back is not None else -1
        user_text = items[user_index].text if user_index >= 0 else ""
        after = items[user_index + 1:]
        rounds_done = _tool_rounds(after)
        directives = parse_directives(user_text)
        reasoning = _reasoning(directives, user_text, rounds_done)
        wanted = _rounds_wanted(directives)
        calls = [d for d in directives if d.name == "call" and d.value in tools]
        if calls and rounds_done < wanted:
            reply = Reply(text="", reasoning=reasoning,
                          calls=tuple(_calls(calls, tools, rounds_done)))
        elif any(d.name == "settings" for d in directives):
            reply = Reply(text=f"Settings: {canonical_json(dict(settings))}",
                          reasoning=reasoning)
        else:
            text = _answer(directives, user_text, after) + media_answer(items, user_index)
            if settings.get("response_format") is not None:  # structured output
                text = structured_text(text, settings["response_format"])
            reply = Reply(text=text, reasoning=reasoning)
        return _shaped(reply, directives, first=rounds_done == 0)


def _obeyed(reply: Reply, calls: tuple[ScriptedCall, ...]) -> Reply:
    """``reply`` with the calls a ``tool_choice`` forced (none: its text, or a sentence)."""
    if not calls:
        return attrs.evolve(reply, calls=(), partial_call=False,
                            text=reply.text or NO_TOOL_TEXT)
    # A forced call has no text beside it (Anthropic prefills the turn to force it).
    return attrs.evolve(reply, text="", refusal=None, sources=(), calls=calls,
                        truncated=False, partial_call=False)


def _limited(reply: Reply, limit: Any) -> Reply:
    """``reply`` cut at ``limit`` words (the request's output limit), marked truncated."""
    if not isinstance(limit, int) or reply.calls:
        return reply
    words = text_deltas(reply.text)
    if len(words) <= limit:
        return reply
    return attrs.evolve(reply, text="".join(words[:max(1, limit)]), truncated=True)


def _shaped(reply: Reply, directives: Sequence[Directive], *, first: bool) -> Reply:
    """``reply`` with the corpus shapes the directives ask for (see ``Directive``)."""
    named = {d.name: d for d in directives}
    if "search" in named and first:
        query = (named["search"].value or "search").replace("_", " ")
        reply = attrs.evolve(reply, search=query)
    if reply.calls:
        return reply
    if "refuse" in named:
        return attrs.evolve(reply, text="", refusal=REFUSAL)
    if "image" in named:
        reply = attrs.evolve(reply, images=named["image"].count)
    cited = tuple(d.value for d in directives if d.name == "cite" and d.value)
    if cited:
        reply = attrs.evolve(reply, sources=cited)
    if "cutoff" in named:
        words = text_deltas(reply.text)
        return attrs.evolve(reply, text="".join(words[:max(1, len(words) // 2)]),
                            truncated=True)
    return reply


def _tool_rounds(items: Sequence[Item]) -> int:
    rounds, previous = 0, ""
    for item in items:
        if item.kind == "tool_result" and previous != "tool_result":
            rounds += 1
        previous = item.kind
    return rounds


def _rounds_wanted(directives: Sequence[Directive]) -> int:
    for d in directives:
        if d.name == "rounds" and d.value and d.value.isdigit():
            return int(d.value)
    return 1


def _reasoning(directives: Sequence[Directive], user_text: str, rounds: int) -> str | None:
    if not any(d.name == "think" for d in directives):
        return None
    return f"Thinking about {_plain(user_text)[:40]!r} (round {rounds})."


def _calls(
    directives: Sequence[Directive], tools: Mapping[str, Mapping[str, Any]], rounds: int
) -> list[ScriptedCall]:
    out = []
    for d in directives:
        schema = tools[d.value or ""]
        arguments = d.arguments if d.arguments is not None else example_arguments(schema)
        for _ in range(d.count):
            out.append(ScriptedCall(name=d.value or "", arguments=compact_json(arguments)))
    return out


RESULT_CHARS = 240
"""How much of each tool result the scripted answer quotes (whole results, in practice)."""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + "…"


def _plain(text: str) -> str:
    return _DIRECTIVE.sub("", text).strip()


def _answer(directives: Sequence[Directive], user_text: str, after: Sequence[Item]) -> str:
    for d in directives:
        if d.name == "say" and d.value:
            return d.value.replace("_", " ")
    results = [it for it in after if it.kind == "tool_result"]
    if results:
        summary = "; ".join(f"{it.name or it.call_id}={_clip(it.text, RESULT_CHARS)}"
                            for it in results)
        return f"Tool results: {summary}."
    return f"You said: {_plain(user_text)[:120]}"


def media_answer(items: Sequence[Item], user_index: int) -> str:
    """What the answer says of the conversation's images and files: the current user
    message's (``Attached: ...``) and the earlier ones' (``Earlier: ...``), so a test
    sees that they arrived, replayed history included."""
    if user_index < 0:
        return ""
    # A chained conversation (``_chain.ChainView``) finds them without reading it all.
    media_before = getattr(items, "user_media_before", None)
    earlier = media_before(user_index) if media_before is not None else [
        m for it in items[:user_index] if it.kind == "user" for m in it.media]
    attached = items[user_index].media
    said = f" Attached: {'; '.join(attached)}." if attached else ""
    return said + (f" Earlier: {'; '.join(earlier)}." if earlier else "")


# --- comparing a cursor's conversation with the committed history ------------------------


def canonical_arguments(text: str) -> str:
    """Tool-call arguments in canonical JSON (or the raw text if it is not JSON)."""
    try:
        return canonical_json(json.loads(text))
    except ValueError:
        return text


def items_from_messages(messages: Sequence[Message]) -> list[Item]:
    """The committed history in the neutral form emulators report for a cursor.

    User text becomes ``user`` items; an assistant message's parts become ``assistant``
    (consecutive text parts joined), ``tool_call`` (arguments canonicalised) and
    ``tool_result`` items in order; assistant text that follows assistant text (within a
    message or across consecutive assistant messages) is joined into one item.
    Reasoning and transition parts carry no conversation and are left out.
    """
    items: list[Item] = []
    for message in messages:
        kind = "user" if message.role == Role.USER else "assistant"
        append_parts(items, kind, message.parts)
    return items


def append_parts(items: list[Item], kind: str, parts: Sequence[Part]) -> None:
    """Append one message's ``parts`` to ``items`` as ``items_from_messages`` does."""
    text: list[str] = []
    media = tuple(describe(p) for p in parts if isinstance(p, ImagePart | FilePart))
    if kind == "user":
        items.append(Item(kind="user", text="".join(
            p.text for p in parts if isinstance(p, TextPart)), media=media))
        return
    for part in parts:
        if isinstance(part, TextPart):
            text.append(part.text)
            continue
        if isinstance(part, (ToolCallPart, ToolResultPart)) and text:
            append_item(items, Item(kind=kind, text="".join(text)))
            text = []
        if isinstance(part, ToolCallPart):
            items.append(Item(kind="tool_call", call_id=part.call_id, name=part.name,
                              text=canonical_arguments(part.arguments)))
        elif isinstance(part, ToolResultPart):
            items.append(Item(kind="tool_result", call_id=part.call_id, name=part.name,
                              text=part.output))
    if text:
        append_item(items, Item(kind=kind, text="".join(text)))


# --- helpers for emulators that keep conversations (durable providers) -------------------

_WORDS = re.compile(r"\s*\S+|\s+$")


def text_deltas(text: str) -> list[str]:
    """``text`` in word-sized deltas, leading whitespace kept (as real APIs stream)."""
    return _WORDS.findall(text)


def append_item(items: list[Item], item: Item) -> None:
    """Append ``item``, joining consecutive assistant text as ``items_from_messages`` does."""
    if item.kind == "assistant" and items and items[-1].kind == "assistant":
        items[-1] = Item(kind="assistant", text=items[-1].text + item.text)
    else:
        items.append(item)


def pairing_problem(items: Sequence[Item]) -> str | None:
    """The observed 400 message when tool calls and outputs do not pair up, else None.

    An output whose call is not earlier in the conversation: "No tool call found for
    function call output with call_id X."; a call with no output after it: "No tool
    output found for function call X." (providers-wire.md 1.7).
    """
    called: set[str] = set()
    answered: set[str] = set()
    for item in items:
        if item.kind == "tool_call":
            called.add(item.call_id)
        elif item.kind == "tool_result":
            if item.call_id not in called:
                return f"No tool call found for function call output with call_id {item.call_id}."
            answered.add(item.call_id)
    for item in items:
        if item.kind == "tool_call" and item.call_id not in answered:
            return f"No tool output found for function call {item.call_id}."
    return None
