"""A DeepSeek server: ``POST /chat/completions`` (also under ``/v1``), with DeepSeek's rules.

Everything ``ChatCompletionsEmulator`` does (tool pairing, faults, the request log,
``usages``, the scripted model), plus:

* Thinking mode, by model (DeepSeek's V4 release notes and thinking-mode guide):
  ``deepseek-v4-*`` thinks unless the request says ``"thinking": {"type": "disabled"}``;
  ``deepseek-reasoner`` and ``deepseek-chat`` are aliases of ``deepseek-v4-flash`` with
  thinking on and off (the ``thinking`` field overrides), and their responses name
  ``deepseek-v4-flash`` (``SERVED_AS``); a dated name (``deepseek-reasoner-2026-01-01``)
  is its model. ``deepseek-v3*`` (a deployment still on V3.2) thinks with
  ``"thinking": {"type": "enabled"}``, and always as ``deepseek-v3.2-reasoner``.
  Reasoning is produced when the user's text has ``[[think]]`` and the request is in
  thinking mode.
* ``reasoning_content`` rules, two rule sets chosen by model (``rule_set``):
  V3.2 requires the key on every assistant message after the last user message
  ("Missing `reasoning_content` field in the assistant message at message index N");
  V4 requires it on every assistant message with ``tool_calls``, anywhere in the
  conversation, and, for calls this emulator issued, the reasoning it issued with them,
  whatever model name the request or the response carried ("The `reasoning_content`
  in the thinking mode must be passed back to the API."). Errors use DeepSeek's shape:
  ``type`` and ``code`` both ``invalid_request_error``, ``param`` null.
* JSON mode's empty answer (DeepSeek's JSON Output guide: the API "may occasionally
  return empty content"): with ``response_format`` ``json_object``, a question whose
  text has ``[[blank_json]]`` is answered with empty content the first time it is sent
  (``[[blank_json:newlines]]``: ``"\n\n"``), and with JSON when it is sent again.
* A context cache (``emulator.cache``, a ``PrefixCache``): prompt cache hit and miss
  tokens for every request (hit + miss = prompt_tokens), reported on the
  ``finish_reason`` chunk as DeepSeek does, with no separate usage chunk.

Use it like the Chat Completions emulator, with ``API_PREFIX = ""``::

    adapter = DeepSeekAdapter(base_url=server.base_url + DeepSeekEmulator.API_PREFIX)
    emulator.cache.clear()          # forget every persisted prefix unit
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

import attrs

from turnstate.core._json import JsonObject, canonical_json
from turnstate.emulators._chat_completions import (
    ChatCompletionsEmulator,
    Exchange,
    pieces,
    prompt_segments,
    tokens,
)
from turnstate.emulators._chat_rules import ApiError, call_ids_of

V4_MISSING = "The `reasoning_content` in the thinking mode must be passed back to the API."
V32_MISSING = "Missing `reasoning_content` field in the assistant message at message index {}"


class RuleSet(StrEnum):
    """Which ``reasoning_content`` rules a request falls under."""

    NONE = "none"
    V32 = "v3.2"
    V4 = "v4"


SERVED_AS = {"deepseek-reasoner": "deepseek-v4-flash", "deepseek-chat": "deepseek-v4-flash"}
"""The old names are aliases: their responses name the model that served them."""


def rule_set(body: Mapping[str, Any]) -> RuleSet:
    model = str(body.get("model", ""))
    thinking = body.get("thinking")
    mode = thinking.get("type") if isinstance(thinking, dict) else None
    if model.startswith(("deepseek-v4", "deepseek-reasoner")):
        return RuleSet.NONE if mode == "disabled" else RuleSet.V4
    if model.startswith("deepseek-chat"):
        return RuleSet.V4 if mode == "enabled" else RuleSet.NONE
    if model.startswith("deepseek-v3") and (mode == "enabled" or "reasoner" in model):
        return RuleSet.V32
    return RuleSet.NONE


def served_as(model: str) -> str:
    """The model name a response carries for a request naming ``model``."""
    return SERVED_AS.get(model, model)


def deepseek_error(message: str) -> ApiError:
    return ApiError(status=400, message=message, code="invalid_request_error")


def check_reasoning_v32(messages: Sequence[Mapping[str, Any]]) -> ApiError | None:
    """Every assistant message after the last user message carries ``reasoning_content``."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    for index in range(last_user + 1, len(messages)):
        message = messages[index]
        if message.get("role") == "assistant" and "reasoning_content" not in message:
            return deepseek_error(V32_MISSING.format(index))
    return None


def check_reasoning_v4(
    messages: Sequence[Mapping[str, Any]], issued: Mapping[str, str]
) -> ApiError | None:
    """Every assistant message with tool calls passes its reasoning back.

    ``issued`` maps a call id to the reasoning it was issued with (under any model name).
    """
    for message in messages:
        ids = call_ids_of(message)
        if not ids:
            continue
        if "reasoning_content" not in message:
            return deepseek_error(V4_MISSING)
        for call_id in ids:
            known = issued.get(call_id)
            if known is not None and known != message["reasoning_content"]:
                return deepseek_error(V4_MISSING)
    return None


TEXT_ONLY = ("Failed to deserialize the JSON body into the target type: messages[{}]: "
             "unknown variant `{}`, expected `text`")
"""The API's answer to a content part other than text (it takes no images or files;
observed error text, as reported by its users)."""


def check_text_only(messages: Sequence[Mapping[str, Any]]) -> ApiError | None:
    """Every content part of every message is ``text``: DeepSeek takes no images."""
    for index, message in enumerate(messages):
        content = message.get("content")
        for part in content if isinstance(content, list) else ():
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind != "text":
                return deepseek_error(TEXT_ONLY.format(index, kind))
    return None


class PrefixCache:
    """DeepSeek's context cache, as persisted "cache prefix units".

    A request is a list of segments: the canonical JSON of its tools block, then of each
    message (so the system prompt and the tools are part of every prefix). A unit is
    persisted at the end of each request's input and at the end of its output (the
    input plus the assistant message it produced, as the client will send it back). A
    request hits the longest unit it fully starts with, compared segment by segment
    through a hash chain; its hit tokens are that prefix's tokens (about four
    characters per token). The oldest units are evicted beyond ``capacity``.
    """

    def __init__(self, capacity: int = 50_000) -> None:
        self.capacity = capacity
        self._units: OrderedDict[bytes, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._units)

    def clear(self) -> None:
        self._units.clear()

    @staticmethod
    def _chain(segments: Sequence[str]) -> list[tuple[bytes, int]]:
        out, digest, chars = [], b"", 0
        for segment in segments:
            digest = hashlib.sha256(digest + segment.encode("utf-8")).digest()
            chars += len(segment)
            out.append((digest, chars))
        return out

    def match(self, segments: Sequence[str]) -> int:
        """Characters of the longest persisted unit ``segments`` starts with (0: none)."""
        best = 0
        for digest, chars in self._chain(segments):
            if digest in self._units:
                self._units.move_to_end(digest)
                best = chars
        return best

    def persist(self, segments: Sequence[str]) -> None:
        if not segments:
            return
        digest = self._chain(segments)[-1][0]
        self._units[digest] = None
        self._units.move_to_end(digest)
        while len(self._units) > self.capacity:
            self._units.popitem(last=False)


class DeepSeekEmulator(ChatCompletionsEmulator):
    """DeepSeek's Chat Completions API (see the module docstring)."""

    API_PREFIX = ""
    ROUTES = ("/chat/completions", "/v1/chat/completions")
    ID_PREFIX = "ds-"
    CALL_PREFIX = "call_00_"

    def __init__(self, *, cache: PrefixCache | None = None) -> None:
        super().__init__()
        self.cache = cache if cache is not None else PrefixCache()
        self._issued: dict[str, str] = {}
        self._blanked: set[str] = set()  # questions answered blank once ([[blank_json]])

    MAX_CALL_ID = None  # no documented limit on DeepSeek's call ids
    OPENAI_INPUT_RULES = False  # DeepSeek takes no images; its JSON word is advice

    def check(self, body: Any) -> ApiError | None:
        problem = super().check(body)
        if problem is not None:  # DeepSeek's error shape: param null, code = type
            return attrs.evolve(problem, param=None, code="invalid_request_error")
        problem = check_text_only(body["messages"])
        if problem is not None:
            return problem
        rules = rule_set(body)
        if rules is RuleSet.V32:
            return check_reasoning_v32(body["messages"])
        if rules is RuleSet.V4:
            return check_reasoning_v4(body["messages"], self._issued)
        return None

    def thinking(self, body: Mapping[str, Any]) -> bool:
        return rule_set(body) is not RuleSet.NONE

    def context_message(self, window: int, prompt: int, body: Mapping[str, Any]) -> str:
        """DeepSeek's words: the request's total, then its messages' and completion's."""
        completion = body.get("max_tokens")
        completion = completion if isinstance(completion, int) else 0
        return (f"This model's maximum context length is {window} tokens. However, you "
                f"requested {prompt + completion} tokens ({prompt} in the messages, "
                f"{completion} in the completion). Please reduce the length of the messages "
                "or completion.")

    def answer(self, body: JsonObject) -> Exchange:
        exchange = attrs.evolve(super().answer(body),
                                served_model=served_as(str(body.get("model", ""))))
        if self.thinking(body):
            for call_id in exchange.call_ids:
                self._issued[call_id] = exchange.reply.reasoning or ""
        blank = self._blank_json(body)
        if blank is not None and not exchange.reply.calls:
            exchange = attrs.evolve(exchange, reply=attrs.evolve(exchange.reply, text=blank))
        return exchange

    def _blank_json(self, body: JsonObject) -> str | None:
        """The blank content a JSON-mode answer to ``[[blank_json]]`` gets the first time
        its question is sent, else None."""
        fmt = body.get("response_format")
        if not isinstance(fmt, dict) or fmt.get("type") != "json_object":
            return None
        messages = body.get("messages")
        users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"
                 ] if isinstance(messages, list) else []
        question = canonical_json(users[-1]) if users else ""
        if "[[blank_json" not in question or question in self._blanked:
            return None
        self._blanked.add(question)
        return "\n\n" if "[[blank_json:newlines]]" in question else ""

    def reply_message(self, exchange: Exchange) -> JsonObject:
        message = super().reply_message(exchange)
        rules = rule_set(exchange.body)
        if rules is RuleSet.V4 or (rules is RuleSet.V32 and exchange.reply.calls):
            message["reasoning_content"] = (
                exchange.reply.reasoning or "" if exchange.reply.calls else "")
        return message

    def usage(self, exchange: Exchange) -> JsonObject:
        usage = self.plain_usage(exchange)
        segments = prompt_segments(exchange.body)
        hit = tokens(self.cache.match(segments))
        self.cache.persist(segments)
        self.cache.persist([*segments, canonical_json(self.reply_message(exchange))])
        miss = usage["prompt_tokens"] - hit
        usage["prompt_tokens_details"] = {"cached_tokens": hit}
        return {**usage, "prompt_cache_hit_tokens": hit, "prompt_cache_miss_tokens": miss}

    def text_deltas(self, exchange: Exchange) -> list[JsonObject]:
        if not self.thinking(exchange.body):
            return super().text_deltas(exchange)
        reply = exchange.reply
        deltas: list[JsonObject] = [{"role": "assistant", "content": None,
                                     "reasoning_content": ""}]
        deltas += [{"content": None, "reasoning_content": p}
                   for p in pieces(reply.reasoning or "")]
        deltas += [{"content": p, "reasoning_content": None} for p in pieces(reply.text)]
        return deltas

    def closing_chunks(self, exchange: Exchange) -> list[str]:
        delta: JsonObject = {"content": ""}
        if self.thinking(exchange.body):
            delta["reasoning_content"] = None
        return [self.chunk(exchange, delta, finish=exchange.finish_reason,
                           usage=exchange.usage)]
