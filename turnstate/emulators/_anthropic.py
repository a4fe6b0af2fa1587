"""An Anthropic Messages server: ``POST /v1/messages``, with the API's rules.

Use it from a test::

    emulator = AnthropicEmulator()
    async with EmulatorServer(emulator) as server:
        adapter = AnthropicAdapter(base_url=server.base_url + AnthropicEmulator.API_PREFIX,
                                   api_key="test-key", thinking_budget_tokens=2048)
        ...
    emulator.requests      # every request received (RecordedRequest, API key redacted)
    emulator.conversation(-1)  # what the last request replayed, as neutral Items
    emulator.faults.push(Fault(status=529, body={"type": "error", "error": {...}}))
    emulator.model.push(Reply(text="hi"))
    emulator.redact_thinking = True   # issue redacted_thinking blocks instead of thinking

The official SDK talks to it with ``anthropic.AsyncAnthropic(base_url=server.base_url)``.

Rules enforced (HTTP 400 ``invalid_request_error``, the real messages):
``model``, ``max_tokens`` and ``messages`` required ("max_tokens: Field required");
every ``tool_use`` answered by a ``tool_result`` in the next message ("messages.N:
`tool_use` ids were found without `tool_result` blocks immediately after: ..."); every
``tool_result`` answering a ``tool_use`` of the previous message ("messages.N.content.M:
unexpected `tool_use_id` found in `tool_result` blocks: ..."); thinking blocks must
come back unchanged: the emulator signs each one it issues (an HMAC of its text with
``secret``) and rejects an altered or foreign signature ("messages.N.content.M: Invalid
`signature` in `thinking` block."); with thinking enabled, the last assistant message
of an open tool loop must start with its thinking block ("... Expected `thinking` or
`redacted_thinking`, but found `tool_use`. ..."), unless the emulator issued those
calls without thinking. A reply pushed with ``truncated`` and ``partial_call`` ends with
``stop_reason: "max_tokens"`` inside its last ``tool_use`` (part of the input streamed;
``emulator.incomplete`` holds its id): that call was never made, so sent back it still
needs a result ("... without `tool_result` blocks ...") and a result for it answers
nothing ("unexpected `tool_use_id` ..."). A ``tool_use.id`` matches
``^[a-zA-Z0-9_-]+$`` ("messages.N.content.M.tool_use.id: String should match pattern
..."). A text block must hold text, and a message's
text blocks not only whitespace ("messages: text content blocks must be non-empty",
"... must contain non-whitespace text"). Claude 4.x from Opus 4.1 and Sonnet 4.5 on
refuses ``temperature`` with ``top_p`` ("`temperature` and `top_p` cannot both be
specified for this model. Please use only one."). The request's size, its media count and
empty messages as ``_anthropic_limits`` says (413 over 32 MB; 400 over 100 images and
documents or an image over 10 MB; 400 for a message without content but a final assistant one).

Compaction (``_anthropic_compaction``): with the ``compact_20260112`` edit (and its beta
header), a prompt at or over the trigger gets an answer that starts with a
``compaction`` block (streamed with a ``compaction_delta``); a request's conversation
counts from its latest compaction block; a block sent back without its ``content``, or
in a request without the beta header, is refused. A model named in ``context_windows``
refuses a longer prompt ("prompt is too long: N tokens > M maximum").

Thinking is produced when the request enables it and the user's text has ``[[think]]``.
Streams follow the real order (``_anthropic_wire``). Requests without ``stream: true`` get the
message body. Usage is about four characters per token, split by a prompt cache with
Anthropic's rules (``emulator.cache``, ``turnstate.emulators._prompt_cache``): explicit
``cache_control`` breakpoints, at most four ("A maximum of 4 blocks with cache_control
may be provided. Found N."), the model's minimum cacheable length, a 20-block lookback
and five-minute or one-hour entries.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from aiohttp import web

from turnstate.core._json import JsonObject, canonical_json, compact_json
from turnstate.emulators._anthropic_checks import (
    BAD_SIGNATURE,
    DROPPED_THINKING,
    AnthropicError,
    _ids,
    blocks_of,
    check_breakpoints,
    check_budget,
    check_forced_tool_choice,
    check_sampling,
    check_shape,
    check_text_blocks,
    check_tool_ids,
    check_tool_pairing,
    thinking_enabled,
)
from turnstate.emulators._anthropic_compaction import (
    check_compaction_blocks,
    compaction_iterations,
    summary_of,
    trigger_of,
    visible_messages,
)
from turnstate.emulators._anthropic_limits import (
    check_content,
    check_image_sizes,
    check_media_count,
    check_size,
)
from turnstate.emulators._anthropic_wire import refusal_details, stream_events
from turnstate.emulators._base import (
    EmulatorBase,
    Item,
    Reply,
    append_item,
    canonical_arguments,
)
from turnstate.emulators._chat_completions import tokens
from turnstate.emulators._media import describe_block, is_media, token_view
from turnstate.emulators._prompt_cache import (
    BreakpointCache,
)
from turnstate.emulators._settings import wire_settings

DEFAULT_SECRET = b"turnstate-anthropic-emulator"

def conversation_items(messages: Sequence[Mapping[str, Any]]) -> list[Item]:
    """The request's conversation in the neutral form the scripted model reads."""
    items: list[Item] = []
    names: dict[str, str] = {}
    for message in messages:
        run = False  # the last item is this message's user text or media
        for block in blocks_of(message):
            kind = block.get("type")
            if message["role"] == "user" and (kind == "text" or is_media(block)):
                run = _user_block(items, block, joins=run)
                continue
            run = False
            if kind == "text":
                append_item(items, Item(kind="assistant", text=str(block.get("text", ""))))
            elif kind == "compaction" and isinstance(block.get("content"), str):
                append_item(items, Item(kind="assistant", text=block["content"]))
            elif kind == "tool_use":
                names[str(block.get("id"))] = str(block.get("name", ""))
                items.append(Item(kind="tool_call", call_id=str(block.get("id")),
                                  name=str(block.get("name", "")),
                                  text=canonical_arguments(compact_json(block.get("input", {})))))
            elif kind == "tool_result":
                call_id = str(block.get("tool_use_id"))
                items.append(Item(kind="tool_result", call_id=call_id, name=names.get(call_id, ""),
                                  text=_result_text(block.get("content"))))
    return items


def _user_block(items: list[Item], block: Mapping[str, Any], *, joins: bool) -> bool:
    """A user text, image or document block as (part of) a user item: text after text
    starts a new item (two user messages merged into one); an image or a document joins
    the item its message's text or media started, and text after media joins it too."""
    if block.get("type") == "text":
        text = str(block.get("text", ""))
        last = items[-1] if joins else None
        if last is not None and last.media and not last.text:
            items[-1] = attrs.evolve(last, text=text)
        else:
            items.append(Item(kind="user", text=text))
        return True
    media = describe_block(block)
    if joins:
        items[-1] = attrs.evolve(items[-1], media=(*items[-1].media, media))
    else:
        items.append(Item(kind="user", media=(media,)))
    return True


def _result_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return content if isinstance(content, str) else ""


class AnthropicEmulator(EmulatorBase):
    """The Anthropic Messages API (see the module docstring)."""

    API_PREFIX = "/v1"

    def __init__(self, *, secret: bytes = DEFAULT_SECRET, redact_thinking: bool = False,
                 context_windows: Mapping[str, int] | None = None) -> None:
        super().__init__()
        self.secret = secret
        self.redact_thinking = redact_thinking
        # Model name → context window in tokens; a longer prompt is refused ("prompt is
        # too long"). Models not named have no limit.
        self.context_windows: dict[str, int] = dict(context_windows or {})
        self._messages = 0
        self._calls = 0
        self._errors = 0
        self._unthought: set[str] = set()
        self.incomplete: set[str] = set()
        """Ids of the ``tool_use`` blocks a ``max_tokens`` stop cut (``Reply.partial_call``)."""
        self.cache = BreakpointCache()
        """The prompt cache (``emulator.cache.advance(301)`` expires five-minute entries)."""

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/v1/messages", self.handle)]

    def conversation(self, index: int = -1) -> list[Item]:
        """The conversation a logged request carried, in the neutral ``Item`` form
        (compare with ``items_from_messages(history)``: a replay starts from zero)."""
        return conversation_items(self.requests[index].json["messages"])

    # --- signatures ------------------------------------------------------------------

    def sign(self, text: str) -> str:
        digest = hmac.new(self.secret, text.encode("utf-8"), hashlib.sha256).digest()
        return base64.b64encode(digest).decode("ascii")

    def redacted_data(self, text: str) -> str:
        payload = base64.b64encode(text.encode("utf-8")).decode("ascii")
        return f"{payload}.{self.sign(payload)}"

    def _block_valid(self, block: Mapping[str, Any]) -> bool:
        if block.get("type") == "thinking":
            given, signed = block.get("signature"), str(block.get("thinking", ""))
        else:
            signed, _, given = str(block.get("data", "")).partition(".")
        # Bytes: compare_digest refuses non-ASCII text, and a foreign value may hold some.
        return isinstance(given, str) and hmac.compare_digest(
            given.encode("utf-8"), self.sign(signed).encode("utf-8"))

    def check_thinking(self, body: Mapping[str, Any]) -> AnthropicError | None:
        """Signed thinking blocks unchanged; an open tool loop's thinking not dropped."""
        messages = body["messages"]
        for index, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            for position, block in enumerate(blocks_of(message)):
                if block.get("type") in ("thinking", "redacted_thinking") and \
                        not self._block_valid(block):
                    return AnthropicError(status=400, message=BAD_SIGNATURE.format(index, position))
        if not thinking_enabled(body):
            return None
        last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
        if last < 0 or last + 1 >= len(messages):
            return None
        blocks = blocks_of(messages[last])
        uses = _ids(blocks, "tool_use", "id")
        if not uses or not _ids(blocks_of(messages[last + 1]), "tool_result", "tool_use_id"):
            return None
        kinds = [b.get("type") for b in blocks if b.get("type") != "compaction"]
        first = kinds[0] if kinds else "text"
        if first in ("thinking", "redacted_thinking") or set(uses) <= self._unthought:
            return None
        return AnthropicError(status=400, message=DROPPED_THINKING.format(last, first))

    # --- serving ---------------------------------------------------------------------

    def error_response(self, error: AnthropicError) -> web.Response:
        self._errors += 1
        body = {"type": "error", "error": {"type": error.type, "message": error.message},
                "request_id": f"req_{self._errors:06d}"}
        return web.Response(status=error.status, text=compact_json(body),
                            content_type="application/json")

    async def handle(self, request: web.Request) -> web.StreamResponse:
        recorded = await self.record(request)
        fault, early = await self.apply_fault(request)
        if early is not None:
            return early
        too_large = check_size(recorded.size)
        if too_large is not None:
            return self.error_response(too_large)
        body = recorded.json
        beta = request.headers.get("anthropic-beta", "")
        problem = (check_shape(body) or check_content(body)
                   or check_media_count(body["messages"]) or check_image_sizes(body["messages"])
                   or check_sampling(body) or check_budget(body)
                   or check_forced_tool_choice(body) or check_breakpoints(body)
                   or check_text_blocks(body["messages"]) or check_tool_ids(body["messages"])
                   or check_tool_pairing(body["messages"], self.incomplete)
                   or self.check_thinking(body) or self.check_context(body, beta))
        if problem is not None:
            return self.error_response(problem)
        message = self.answer(body, beta=beta)
        if body.get("stream") is True:
            return await self.send_events(request, stream_events(message, self.incomplete),
                                          fault)
        return web.json_response(message)

    def check_context(self, body: Mapping[str, Any], beta: str) -> AnthropicError | None:
        """Compaction blocks sent back whole, a valid compaction edit, and a prompt (from
        its latest compaction block on) within the model's context window."""
        problem = check_compaction_blocks(body["messages"], beta) or trigger_of(body, beta).problem
        if problem is not None:
            return AnthropicError(status=400, message=problem)
        window = self.context_windows.get(str(body["model"]))
        prompt = self.scaled(prompt_tokens(body, visible_messages(body["messages"])))
        if window is not None and prompt > window:
            return AnthropicError(status=400,
                                  message=f"prompt is too long: {prompt} tokens > {window} maximum")
        return None

    def answer(self, body: JsonObject, *, beta: str = "") -> JsonObject:
        """The reply as a complete message body (tool inputs as objects). The model sees
        the conversation from its latest compaction block on; at the trigger, the answer
        starts with a new compaction block and is sampled from it."""
        tools = {str(t.get("name")): t.get("input_schema") or {}
                 for t in body.get("tools") or () if isinstance(t, dict)}
        visible = visible_messages(body["messages"])
        items = conversation_items(visible)
        reply = self.model.respond(items, tools, wire_settings(body))
        if not thinking_enabled(body):
            reply = attrs.evolve(reply, reasoning=None)
        self._messages += 1
        content = self._content(reply)
        if reply.reasoning is None:
            self._unthought.update(b["id"] for b in content if b["type"] == "tool_use")
        if reply.truncated and reply.partial_call and reply.calls:
            self.incomplete.add(content[-1]["id"])
        output = max(1, tokens(sum(len(canonical_json(b)) for b in content)))
        prompt = self.scaled(prompt_tokens(body, visible))
        usage = self.cache_usage(body, visible, prompt)
        usage["output_tokens"] = output
        trigger = trigger_of(body, beta).tokens
        if trigger is not None and prompt >= trigger:
            block = self.compaction_block(items)
            compacted = prompt_tokens(body, [{"role": "assistant", "content": [block]}])
            content.insert(0, block)
            usage["input_tokens"] = compacted
            usage["iterations"] = compaction_iterations(
                prompt, tokens(len(block["content"])), compacted, output)
        message: JsonObject = {
            "id": f"msg_{self._messages:06d}", "type": "message", "role": "assistant",
            "model": body["model"], "content": content,
            "stop_reason": _stop_reason(reply), "stop_sequence": None, "usage": usage}
        if message["stop_reason"] == "refusal":
            message["stop_details"] = refusal_details(reply.refusal or "", body["model"])
        return message

    def cache_usage(self, body: JsonObject, visible: Sequence[Any], prompt: int) -> JsonObject:
        """The input usage of a request of ``prompt`` tokens, split by the prompt cache
        (``self.cache``, Anthropic's breakpoint rules)."""
        figures = self.cache.apply(body, visible, prompt)
        one_hour = '"ttl":"1h"' in canonical_json(body)
        return {"input_tokens": prompt - figures.read - figures.write,
                "cache_creation_input_tokens": figures.write,
                "cache_read_input_tokens": figures.read,
                "cache_creation": {"ephemeral_5m_input_tokens": 0 if one_hour else figures.write,
                                   "ephemeral_1h_input_tokens": figures.write if one_hour else 0}}

    def compaction_block(self, items: Sequence[Item]) -> JsonObject:
        """A compaction block summarising ``items``, its ``encrypted_content`` signed."""
        summary = summary_of([i.text for i in items if i.kind == "user"], len(items))
        return {"type": "compaction", "content": summary, "encrypted_content": self.sign(summary)}

    def _content(self, reply: Reply) -> list[JsonObject]:
        content: list[JsonObject] = []
        if reply.reasoning is not None and self.redact_thinking:
            content.append({"type": "redacted_thinking",
                            "data": self.redacted_data(reply.reasoning)})
        elif reply.reasoning is not None:
            content.append({"type": "thinking", "thinking": reply.reasoning,
                            "signature": self.sign(reply.reasoning)})
        if reply.search:
            self._calls += 1
            search_id = f"srvtoolu_{self._calls:06d}"
            content.append({"type": "server_tool_use", "id": search_id, "name": "web_search",
                            "input": {"query": reply.search}})
            content.append({"type": "web_search_tool_result", "tool_use_id": search_id,
                            "content": [{"type": "web_search_result", "page_age": None,
                                         "title": f"About {reply.search}",
                                         "url": "https://search.example/1",
                                         "encrypted_content": self.sign(reply.search)}]})
        if reply.text:  # a refusal is no content block: its words are in stop_details
            content.append({"type": "text", "text": reply.text})
        for call in reply.calls:
            self._calls += 1
            content.append({"type": "tool_use", "id": f"toolu_{self._calls:06d}",
                            "name": call.name, "input": tool_arguments(call.arguments)})
        return content


def prompt_tokens(body: Mapping[str, Any], messages: Sequence[Any]) -> int:
    """About four characters per token of the system prompt, tools and ``messages``
    (images and documents as their tokens, ``token_view``)."""
    return tokens(len(canonical_json([body.get("system"), body.get("tools"),
                                      token_view(messages, "anthropic")])))


def _stop_reason(reply: Reply) -> str:
    if reply.truncated:  # cut at the limit, calls made before it or not
        return "max_tokens"
    if reply.calls:
        return "tool_use"
    if reply.refusal:
        return "refusal"
    return "max_tokens" if reply.truncated else "end_turn"


def tool_arguments(arguments: str) -> JsonObject:
    value = json.loads(arguments) if arguments else {}
    return value if isinstance(value, dict) else {}
