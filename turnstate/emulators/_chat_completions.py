"""An OpenAI-compatible Chat Completions server: ``POST /v1/chat/completions``.

Use it from a test::

    emulator = ChatCompletionsEmulator()
    async with EmulatorServer(emulator) as server:
        adapter = ChatCompletionsAdapter(
            base_url=server.base_url + ChatCompletionsEmulator.API_PREFIX, api_key="test-key")
        ...
    emulator.requests      # every request received (RecordedRequest, API key redacted)
    emulator.usages        # the usage object reported for each answered request
    emulator.conversation(-1)  # what the last request replayed, as neutral Items
    emulator.faults.push(Fault(status=503, body={...}))   # the next request fails
    emulator.model.push(Reply(text="hi"))                  # an explicit reply

Rules enforced, with the real error bodies (HTTP 400, ``invalid_request_error``):
``model`` and a non-empty ``messages`` array must be present; every ``tool_calls`` id of
an assistant message must be answered by ``tool`` messages that follow it before any
other message ("An assistant message with 'tool_calls' must be followed by tool
messages responding to each 'tool_call_id'. ..."); every ``tool`` message must answer a
call of the assistant message before it ("Messages with role 'tool' must be a response
to a preceeding message with 'tool_calls'").

Replayed call ids are never empty ("Invalid 'messages[N].tool_calls[M].id': empty
string. ...", also for ``tool_call_id``) nor longer than 40 characters ("... string too
long. Expected a string with maximum length 40, ...", ``string_above_max_length``): the
ids of an assistant message's calls are the ones its ``tool`` messages answer. A
request's model picks the server dialect (``_chat_dialects``): ``gemini-*`` streams
calls with ``"id": ""`` and no ``index`` (Gemini's OpenAI-compatible endpoint),
``gpt-oss-*`` streams reasoning (``[[think]]``) as ``delta.reasoning`` and refuses
``reasoning_content`` sent back (Groq).

Replies come from the scripted model (``[[call:NAME]]``, ``[[say:TEXT]]``, ...; see
``turnstate.emulators._base``). Streams send, with no ``event:`` line, a role chunk,
content chunks split on spaces, tool-call chunks (id and name first, then pieces of the
arguments), a ``finish_reason`` chunk, the ``choices: []`` usage chunk when
``stream_options.include_usage`` is set, and ``data: [DONE]``. Requests without
``stream: true`` get the ``chat.completion`` body. Usage is about four characters per
token of the canonical JSON of the tools and messages (prompt) and of the reply.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from aiohttp import web

from turnstate.core._json import JsonObject, canonical_json, compact_json
from turnstate.emulators._base import (
    EmulatorBase,
    Item,
    Reply,
    append_item,
    canonical_arguments,
)
from turnstate.emulators._chat_dialects import DIALECTS, OPENAI, Dialect, dialect_of
from turnstate.emulators._chat_rules import (
    ApiError,
    check_call_ids,
    check_refused_fields,
    check_request_fields,
    check_shape,
    check_tool_pairing,
)
from turnstate.emulators._media import token_view, user_item
from turnstate.emulators._openai_limits import (
    CHAT_JSON_WORD,
    image_problem,
    json_object_asked,
    message_texts,
    says_json,
)
from turnstate.emulators._prompt_cache import AutomaticCache
from turnstate.emulators._settings import wire_settings

CHARS_PER_TOKEN = 4
CREATED = 1_770_000_000


@attrs.frozen(kw_only=True)
class Exchange:
    """One answered request: the request body, the reply and its ids and usage."""

    body: JsonObject
    reply: Reply
    completion_id: str
    call_ids: tuple[str, ...]
    usage: JsonObject = attrs.field(factory=dict)
    served_model: str = ""
    """The model name the response carries, when not the requested one (an alias)."""

    @property
    def model(self) -> str:
        return self.served_model or str(self.body.get("model", ""))

    @property
    def finish_reason(self) -> str:
        if self.reply.truncated:  # cut at the limit, calls made before it or not
            return "length"
        return "tool_calls" if self.reply.calls else "stop"


def tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def content_text(content: Any) -> str:
    """A message's ``content``: a string, or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content
                       if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def conversation_items(messages: Sequence[Mapping[str, Any]]) -> list[Item]:
    """The request's conversation in the neutral form the scripted model reads."""
    items: list[Item] = []
    names: dict[str, str] = {}
    for message in messages:
        role, text = message.get("role"), content_text(message.get("content"))
        if role == "user":
            items.append(user_item(message.get("content")))
        elif role == "assistant":
            if text:
                append_item(items, Item(kind="assistant", text=text))
            calls = message.get("tool_calls")
            for call in calls if isinstance(calls, list) else ():
                if not isinstance(call, dict):
                    continue
                function = call.get("function") or {}
                names[call.get("id", "")] = function.get("name", "")
                items.append(Item(kind="tool_call", call_id=call.get("id", ""),
                                  name=function.get("name", ""),
                                  text=canonical_arguments(function.get("arguments", ""))))
        elif role == "tool":
            call_id = str(message.get("tool_call_id", ""))
            items.append(Item(kind="tool_result", call_id=call_id, name=names.get(call_id, ""),
                              text=text))
    return items


def tool_schemas(body: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for tool in body.get("tools") or ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            out[function["name"]] = function.get("parameters") or {}
    return out


def prompt_segments(body: Mapping[str, Any]) -> list[str]:
    """The canonical JSON of the tools block, then of each message: what is tokenised
    (images and files as their tokens, ``token_view``)."""
    return [canonical_json(body.get("tools") or []),
            *(canonical_json(token_view(m, "openai")) for m in body["messages"])]


def pieces(text: str) -> list[str]:
    """Text split after each run of spaces, as a model streams it."""
    return re.findall(r"\S+\s*|\s+", text)


def fragments(text: str, count: int = 3) -> list[str]:
    size = max(1, math.ceil(len(text) / count))
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


class ChatCompletionsEmulator(EmulatorBase):
    """The OpenAI-compatible Chat Completions API (see the module docstring)."""

    API_PREFIX = "/v1"
    ROUTES: tuple[str, ...] = ("/v1/chat/completions",)
    ID_PREFIX = "chatcmpl-"
    CALL_PREFIX = "call_"

    def __init__(self) -> None:
        super().__init__()
        self.usages: list[JsonObject] = []
        self.prompt_cache = AutomaticCache()
        """OpenAI's automatic prefix caching (1,024 tokens, then 128-token steps)."""
        self._completions = 0
        self._calls = 0
        self.dialects = dict(DIALECTS)
        """Model-name prefix → server dialect (``_chat_dialects``)."""
        self.context_windows: dict[str, int] = {}
        """Model name → window: a longer prompt is refused with a 400 that names both
        figures (``context_message``)."""

    def routes(self) -> list[web.RouteDef]:
        return [web.post(path, self.handle) for path in self.ROUTES]

    def conversation(self, index: int = -1) -> list[Item]:
        """The conversation a logged request carried, in the neutral ``Item`` form
        (compare with ``items_from_messages(history)``: a replay starts from zero)."""
        return conversation_items(self.requests[index].json["messages"])

    async def handle(self, request: web.Request) -> web.StreamResponse:
        recorded = await self.record(request)
        fault, early = await self.apply_fault(request)
        if early is not None:
            return early
        problem = self.check(recorded.json)
        if problem is not None:
            return problem.response()
        exchange = self.answer(recorded.json)
        self.usages.append(exchange.usage)
        if exchange.body.get("stream") is True:
            return await self.send_events(request, self.stream_events(exchange), fault)
        return web.json_response(self.completion_body(exchange))

    # --- rules and replies (hooks for DeepSeek) ---------------------------------------

    def dialect(self, body: Mapping[str, Any]) -> Dialect:
        return dialect_of(str(body.get("model", "")), self.dialects)

    MAX_CALL_ID: int | None = 40
    """The longest replayed call id taken (OpenAI's limit; DeepSeek documents none)."""

    def check(self, body: Any) -> ApiError | None:
        return (check_shape(body) or check_request_fields(body, self.dialect(body))
                or check_call_ids(body["messages"], self.MAX_CALL_ID)
                or check_tool_pairing(body["messages"])
                or check_refused_fields(body["messages"], self.dialect(body))
                or self.check_openai_input(body) or self.check_window(body))

    OPENAI_INPUT_RULES: bool = True
    """OpenAI's image limits and JSON mode's word (``_openai_limits``), kept for the
    OpenAI dialect; DeepSeek and the other dialects' servers document neither."""

    def check_openai_input(self, body: Mapping[str, Any]) -> ApiError | None:
        if not self.OPENAI_INPUT_RULES or self.dialect(body) is not OPENAI:
            return None
        problem = image_problem(body["messages"], "messages")
        if problem is not None:
            return ApiError(status=400, param=problem[0], message=problem[1])
        if json_object_asked(body.get("response_format")) and not says_json(
                text for m in body["messages"] for text in message_texts(m.get("content"))):
            return ApiError(status=400, param="messages", message=CHAT_JSON_WORD)
        return None

    def check_window(self, body: Mapping[str, Any]) -> ApiError | None:
        window = self.context_windows.get(str(body.get("model", "")))
        if window is None:
            return None
        prompt = self.scaled(tokens(sum(map(len, prompt_segments(body)))))
        if prompt <= window:
            return None
        return ApiError(status=400, message=self.context_message(window, prompt, body),
                        param="messages", code="context_length_exceeded")

    def context_message(self, window: int, prompt: int, body: Mapping[str, Any]) -> str:
        """OpenAI's words for a prompt longer than the model's window."""
        return (f"This model's maximum context length is {window} tokens. However, your "
                f"messages resulted in {prompt} tokens. Please reduce the length of the "
                "messages.")

    def thinking(self, body: Mapping[str, Any]) -> bool:
        """Whether the request runs in a thinking mode (OpenAI's dialect: never)."""
        return self.dialect(body).reasoning_field is not None

    def answer(self, body: JsonObject) -> Exchange:
        reply = self.model.respond(conversation_items(body["messages"]), tool_schemas(body),
                                   wire_settings(body))
        if not self.thinking(body):
            reply = attrs.evolve(reply, reasoning=None)
        self._completions += 1
        ids = []
        for _ in reply.calls:
            self._calls += 1
            ids.append(f"{self.CALL_PREFIX}{self._calls:06d}")
        if self.dialect(body).anonymous_calls:
            ids = ["" for _ in ids]
        exchange = Exchange(body=body, reply=reply, call_ids=tuple(ids),
                            completion_id=f"{self.ID_PREFIX}{self._completions:06d}")
        return attrs.evolve(exchange, usage=self.usage(exchange))

    def reply_message(self, exchange: Exchange) -> JsonObject:
        """The assistant message produced, as a client sends it back."""
        reply = exchange.reply
        message: JsonObject = {"role": "assistant", "content": reply.text or None}
        if reply.refusal:
            message["refusal"] = reply.refusal
        if reply.calls:
            message["tool_calls"] = [
                {"id": call_id, "type": "function",
                 "function": {"name": call.name, "arguments": call.arguments}}
                for call_id, call in zip(exchange.call_ids, reply.calls, strict=True)]
        return message

    def usage(self, exchange: Exchange) -> JsonObject:
        """``plain_usage`` with OpenAI's automatic prefix caching (``self.prompt_cache``,
        routed by the request's ``prompt_cache_key``)."""
        usage = self.plain_usage(exchange)
        key = str(exchange.body.get("prompt_cache_key") or "")
        segments = prompt_segments(exchange.body)
        cached = self.prompt_cache.lookup(key, segments, usage["prompt_tokens"])
        self.prompt_cache.store(key, [*segments, canonical_json(self.reply_message(exchange))])
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
        return usage

    def plain_usage(self, exchange: Exchange) -> JsonObject:
        """Prompt and completion tokens, nothing cached."""
        prompt = self.scaled(tokens(sum(map(len, prompt_segments(exchange.body)))))
        reply = exchange.reply
        reasoning = tokens(len(reply.reasoning or ""))
        completion = max(1, tokens(len(reply.text) + sum(len(c.arguments) for c in reply.calls))
                         + reasoning)
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": reasoning}}

    # --- wire shapes -----------------------------------------------------------------

    def chunk(self, exchange: Exchange, delta: JsonObject, *, finish: str | None = None,
              usage: JsonObject | None = None) -> str:
        choices = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        return compact_json({"id": exchange.completion_id, "object": "chat.completion.chunk",
                             "created": CREATED + self._completions, "model": exchange.model,
                             "system_fingerprint": "fp_emulator", "choices": choices,
                             "usage": usage})

    def text_deltas(self, exchange: Exchange) -> list[JsonObject]:
        """The role chunk's delta, then reasoning and content deltas."""
        reply = exchange.reply
        deltas: list[JsonObject] = [{"role": "assistant", "content": ""}]
        field = self.dialect(exchange.body).reasoning_field or "reasoning_content"
        deltas += [{field: p} for p in pieces(reply.reasoning or "")]
        deltas += [{"content": p} for p in pieces(reply.text)]
        deltas += [{"content": None, "refusal": p} for p in pieces(reply.refusal or "")]
        return deltas

    def closing_chunks(self, exchange: Exchange) -> list[str]:
        """The ``finish_reason`` chunk and, when asked for, the usage chunk."""
        out = [self.chunk(exchange, {}, finish=exchange.finish_reason)]
        options = exchange.body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage") is True:
            out.append(compact_json({
                "id": exchange.completion_id, "object": "chat.completion.chunk",
                "created": CREATED + self._completions, "model": exchange.model,
                "system_fingerprint": "fp_emulator", "choices": [], "usage": exchange.usage}))
        return out

    def call_deltas(self, exchange: Exchange) -> list[JsonObject]:
        calls = list(zip(exchange.call_ids, exchange.reply.calls, strict=True))
        if self.dialect(exchange.body).anonymous_calls:
            return [{"tool_calls": [{"id": call_id, "type": "function", "function": {
                "name": call.name, "arguments": call.arguments}}]} for call_id, call in calls]
        deltas: list[JsonObject] = []
        for index, (call_id, call) in enumerate(calls):
            deltas.append({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                           "function": {"name": call.name, "arguments": ""}}]})
            deltas += [{"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
                       for piece in fragments(call.arguments)]
        return deltas

    def stream_events(self, exchange: Exchange) -> list[tuple[str | None, str]]:
        chunks = [self.chunk(exchange, delta)
                  for delta in (*self.text_deltas(exchange), *self.call_deltas(exchange))]
        chunks += self.closing_chunks(exchange)
        return [(None, data) for data in (*chunks, "[DONE]")]

    def completion_body(self, exchange: Exchange) -> JsonObject:
        message = self.reply_message(exchange)
        if exchange.reply.reasoning is not None and self.thinking(exchange.body):
            field = self.dialect(exchange.body).reasoning_field or "reasoning_content"
            message[field] = exchange.reply.reasoning
        return {"id": exchange.completion_id, "object": "chat.completion",
                "created": CREATED + self._completions, "model": exchange.model,
                "system_fingerprint": "fp_emulator",
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": exchange.finish_reason}],
                "usage": exchange.usage}
