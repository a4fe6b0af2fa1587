"""An OpenAI Responses emulator: ``POST /v1/responses`` with stored response chains.

It speaks the real wire format (request shapes validated with the real error bodies,
SSE events in the real order, the non-streaming JSON body the official SDK parses) and
keeps server state the way the API does: every stored response knows its full
conversation (the previous response's, then this request's input, then this
response's output), so a test can ask what a cursor stands for. It keeps it as a chain
(``_chain``): a stored response holds its own items and a pointer to the one it
continues, so a continuation costs its new items, not the chain's length.

Using it::

    emulator = OpenAIResponsesEmulator()
    async with EmulatorServer(emulator) as server:
        adapter = OpenAIResponsesAdapter(
            base_url=server.base_url + OpenAIResponsesEmulator.API_PREFIX, api_key="test-key")
        ...
    emulator.conversation_for("resp_000001")  # list[Item], what the cursor stands for
    emulator.expire("resp_000001")            # later use: previous_response_not_found
    emulator.evict_all()                      # every stored response is gone
    emulator.faults.push(Fault(status=500))   # the next request fails
    emulator.model.push(Reply(text="..."))    # script the next reply
    emulator.requests                         # every request received (key redacted)

Rules enforced, with the real statuses and bodies (providers-wire.md 1.7):

* ``previous_response_id`` unknown, expired, evicted or of a ``store: false``
  response: 400 ``previous_response_not_found``; not shaped like ``resp_...``: 400
  ``invalid_value`` with ``param: previous_response_id``.
* a function call without its output anywhere in the chained conversation: 400 "No
  tool output found for function call call_...."; an output without its call: 400
  "No tool call found for function call output with call_id call_....".
* an input item carrying a server id that is not stored: 404 "Item with id ... not
  found. Items are not persisted when `store` is set to false. ...".
* tools must be flat function tools; a missing API key is a 401.

Compaction: with ``context_management`` present and the conversation's estimated
tokens (about 4 characters per token of its JSON) above ``compact_threshold``, the
response gets a ``compaction`` output item, the stored response is marked
``compacted``, and later chained requests report input tokens from the compacted
context. A stateless chain may start at a compaction item (the API lets a client drop
every item before the latest one): its input counts from there, and the emulator
remembers what each compaction item it issued stands for, so the conversation stays
whole. A model named in ``context_windows`` refuses a longer input with 400
``context_length_exceeded``. Usage is estimated the same way; the chained prefix counts as cached.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import attrs
from aiohttp import web

from turnstate.core._context import estimate_tokens
from turnstate.core._json import JsonObject, canonical_json, compact_json
from turnstate.emulators._base import (
    ChainedEmulator,
    Item,
    RecordedRequest,
    Reply,
)
from turnstate.emulators._chain import ChainBuilder, ChainNode, ChainView, prefix_of
from turnstate.emulators._media import token_view
from turnstate.emulators._prompt_cache import AutomaticCache
from turnstate.emulators._responses_rules import (
    ApiError,
    check_openai_input,
    check_output_limit,
    check_reasoning_item,
    compact_threshold,
    function_tools,
    input_items,
    latest_compaction,
    require,
)
from turnstate.emulators._responses_wire import (
    add_items,
    error_body,
    item_type,
    stream_events,
)

_RESPONSE_ID = re.compile(r"^resp_[A-Za-z0-9]+$")
REASONING_MODELS = ("o1", "o3", "o4", "gpt-5")
COMPACTED_CONTEXT_TOKENS = 64
"""The input tokens a compacted context costs the next chained request."""
EXTENDED_SECONDS = 86_400.0
"""How long a prefix cached under ``prompt_cache_retention: "24h"`` lives."""


@attrs.frozen(kw_only=True)
class StoredResponse:
    """A response kept by the emulator (``store: true``)."""

    id: str
    model: str
    node: ChainNode | None = attrs.field(eq=False, repr=False)
    """The conversation after this response: its own items, then the one it continues."""
    body: JsonObject = attrs.field(eq=False)
    context_tokens: int
    compacted: bool = False

    @property
    def conversation(self) -> tuple[Item, ...]:
        """The whole conversation this response stands for (walks the chain)."""
        return tuple(ChainView(self.node))


@attrs.frozen(kw_only=True)
class _Turn:
    """A validated request: what the model sees and how to answer."""

    body: Mapping[str, Any] = attrs.field(eq=False)
    previous: StoredResponse | None
    node: ChainNode = attrs.field(eq=False)
    """The conversation the model sees: the chain continued by this request's input."""
    tools: Mapping[str, Mapping[str, Any]]
    input_tokens: int
    threshold: int | None
    fixed_tokens: int = 0
    """The instructions' and tools' share of ``input_tokens``: resent with every request,
    never carried over by ``previous_response_id``."""

    @property
    def conversation(self) -> ChainView:
        return ChainView(self.node)


class OpenAIResponsesEmulator(ChainedEmulator):
    """The Responses API on loopback. See the module docstring for the rules."""

    API_PREFIX: ClassVar[str] = "/v1"
    API_PREFIXES: ClassVar[tuple[str, ...]] = (API_PREFIX,)
    RESOURCE: ClassVar[str] = "responses"
    STREAM_EVENTS = stream_events

    def __init__(self, *, require_auth: bool = True,
                 clock: Callable[[], int] | None = None,
                 context_windows: Mapping[str, int] | None = None) -> None:
        super().__init__()
        self.require_auth = require_auth
        self.prompt_cache = AutomaticCache()
        """OpenAI's automatic prefix caching (1,024 tokens, then 128-token steps)."""
        # Model name → context window in tokens (a longer input is
        # ``context_length_exceeded``); models not named have no limit.
        self.context_windows: dict[str, int] = dict(context_windows or {})
        # What each compaction item it issued stands for (its encrypted_content → the
        # conversation), so a stateless chain that starts at one continues it whole.
        self.compactions: dict[str, ChainNode | None] = {}
        self.responses: dict[str, StoredResponse] = self.chains
        self._items: set[str] = set()
        ticks = itertools.count(1_770_000_000)
        self._clock = clock or (lambda: next(ticks))

    # --- the test API ------------------------------------------------------------------

    project_tier = "default"
    """The service tier a request asking ``auto`` (or none) is billed at: the project's
    setting (``default`` unless configured; a test sets ``flex`` or ``priority``)."""

    def service_tier(self, body: Mapping[str, Any]) -> str:
        """The tier the response names: the request's, or the project's for ``auto``."""
        asked = body.get("service_tier")
        return asked if isinstance(asked, str) and asked != "auto" else self.project_tier

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{self.id_tag}{self.next_number(prefix):06d}"

    # --- handlers ----------------------------------------------------------------------

    def _unknown(self, chain_id: str) -> web.Response:
        message = f"Response with id '{chain_id}' not found."
        return web.json_response(error_body(message), status=404)

    def _deleted(self, chain_id: str) -> JsonObject:
        return {"id": chain_id, "object": "response", "deleted": True}

    def _check_auth(self, request: web.Request) -> None:
        scheme, _, key = request.headers.get("Authorization", "").partition(" ")
        if self.require_auth and (scheme.lower() != "bearer" or not key.strip()):
            message = ("You didn't provide an API key. You need to provide your API key in "
                       "an Authorization header using Bearer auth (i.e. Authorization: "
                       "Bearer YOUR_KEY).")
            raise ApiError(401, error_body(message))

    # --- request rules -----------------------------------------------------------------

    def _prepare(self, recorded: RecordedRequest) -> _Turn:
        body = recorded.json
        if not isinstance(body, dict):
            message = ("We could not parse the JSON body of your request. (HINT: This likely "
                       "means you aren't using your HTTP library correctly.)")
            raise ApiError(400, error_body(message))
        require(body, "model", str)
        check_output_limit(body)
        inputs = input_items(body)
        self._check_item_ids(inputs)
        previous = self._previous(body.get("previous_response_id"))
        prior = previous.node if previous else None
        context = previous.context_tokens if previous else 0
        start = latest_compaction(inputs)
        if start is not None:  # the chain starts again at the compaction item
            payload = str(inputs[start]["encrypted_content"])
            prior, context = self.compactions.get(payload), COMPACTED_CONTEXT_TOKENS
            inputs = inputs[start + 1:]
        builder = ChainBuilder(prior)
        add_items(builder, inputs)
        problem = builder.pairing_problem()
        if problem:
            raise ApiError(400, error_body(problem, param="input"))
        check_openai_input(body, inputs, ChainView(prior))
        fixed = self.scaled(estimate_tokens(str(body.get("instructions") or ""),
                                            compact_json(body.get("tools") or [])))
        total = fixed + context + self.scaled(
            estimate_tokens(compact_json(token_view(inputs, "openai"))))
        self._check_window(str(body["model"]), total)
        return _Turn(body=body, previous=previous, node=builder.node(),
                     tools=function_tools(body.get("tools")), input_tokens=total,
                     fixed_tokens=fixed,
                     threshold=compact_threshold(body.get("context_management")))

    def _check_window(self, model: str, tokens: int) -> None:
        window = self.context_windows.get(model)
        if window is not None and tokens > window:
            message = ("Your input exceeds the context window of this model. Please adjust "
                       "your input and try again.")
            raise ApiError(400, error_body(message, param="input",
                                           code="context_length_exceeded"))

    def _previous(self, cursor: Any) -> StoredResponse | None:
        if cursor is None:
            return None
        if not isinstance(cursor, str) or not _RESPONSE_ID.match(cursor):
            message = (f"Invalid 'previous_response_id': '{cursor}'. Expected an ID that "
                       "begins with 'resp'.")
            raise ApiError(400, error_body(message, param="previous_response_id",
                                           code="invalid_value"))
        if not self.stored(cursor):
            message = f"Previous response with id '{cursor}' not found."
            raise ApiError(400, error_body(message, param="previous_response_id",
                                           code="previous_response_not_found"))
        return self.responses[cursor]

    def _check_item_ids(self, inputs: Sequence[Mapping[str, Any]]) -> None:
        """Items named by id must be stored, except a reasoning item that carries its
        ``encrypted_content`` (the stateless and ZDR guide passes back items of
        ``store: false`` responses, which were never persisted, with their ids)."""
        for index, raw in enumerate(inputs):
            item_id = raw.get("id")
            if item_type(raw) == "reasoning":
                check_reasoning_item(index, raw)
                if raw.get("encrypted_content"):
                    continue
            if isinstance(item_id, str) and item_id not in self._items:
                message = (f"Item with id '{item_id}' not found. Items are not persisted when "
                           "`store` is set to false. Try again with `store` set to true, or "
                           "remove this item from your input.")
                raise ApiError(404, error_body(message, param="input"))

    # --- the answer --------------------------------------------------------------------

    def _respond(self, turn: _Turn, reply: Reply) -> JsonObject:
        body = turn.body
        output = self._output(reply, reasoning=_reasons(body), encrypted=_wants_encrypted(body))
        builder = ChainBuilder(turn.node)
        add_items(builder, output)
        after = builder.node()
        context = turn.input_tokens + self.scaled(estimate_tokens(compact_json(output)))
        compacted = turn.threshold is not None and context > turn.threshold
        if compacted:
            item_id = self.new_id("cmp")
            payload = f"emulated-compaction:{item_id}:{after.length}"
            self.compactions[payload] = after
            output.append({"id": item_id, "type": "compaction", "encrypted_content": payload})
        response_id = self.new_id("resp")
        store = body.get("store") is not False
        response = {
            "id": response_id, "object": "response", "created_at": self._clock(),
            "status": "incomplete" if reply.truncated else "completed", "error": None,
            "incomplete_details": ({"reason": "max_output_tokens"} if reply.truncated
                                   else None),
            "instructions": body.get("instructions"), "model": body["model"], "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": turn.previous.id if turn.previous else None,
            "store": store, "tool_choice": "auto", "tools": body.get("tools") or [],
            "usage": _usage(turn, output, reply, self._cached(turn, after)),
            "service_tier": self.service_tier(body),
        }
        if store:
            self._items.update(str(item["id"]) for item in output)
            self.responses[response_id] = StoredResponse(
                id=response_id, model=body["model"], node=after,
                body=response, compacted=compacted,
                context_tokens=(COMPACTED_CONTEXT_TOKENS if compacted
                                else context - turn.fixed_tokens))
        return response

    def _cached(self, turn: _Turn, after: ChainNode) -> int:
        """Automatic prefix caching, routed by ``prompt_cache_key``: the cached tokens of
        this request; the prefixes of its prompt and of the conversation after its
        output are remembered. Only this request's items are hashed: the chain it
        continues keeps its own prefix (``prefix_of``)."""
        key = str(turn.body.get("prompt_cache_key") or "")
        fixed = fixed_unit(turn.body)
        # Extended retention keeps the prefix a day (OpenAI: "up to 24 hours").
        ttl = EXTENDED_SECONDS if turn.body.get("prompt_cache_retention") == "24h" else None
        cached = self.prompt_cache.lookup_prefix(key, prefix_of(turn.node, fixed, item_unit),
                                                 turn.input_tokens, ttl)
        added = len(turn.node.items) + len(after.items) + 1
        self.prompt_cache.store_prefix(key, prefix_of(after, fixed, item_unit), added, ttl)
        return cached

    def _output(self, reply: Reply, *, reasoning: bool, encrypted: bool) -> list[JsonObject]:
        output: list[JsonObject] = []
        if reply.reasoning and reasoning:
            output.append({"id": self.new_id("rs"), "type": "reasoning",
                           "summary": [{"type": "summary_text", "text": reply.reasoning}],
                           "encrypted_content": (f"emulated-reasoning:{reply.reasoning}"
                                                 if encrypted else None)})
        if reply.search:
            output.append({"id": self.new_id("ws"), "type": "web_search_call",
                           "status": "completed",
                           "action": {"type": "search", "query": reply.search}})
        content: JsonObject | None = None
        if reply.refusal:
            content = {"type": "refusal", "refusal": reply.refusal}
        elif reply.text:
            content = {"type": "output_text", "text": reply.text, "logprobs": [],
                       "annotations": [{"type": "url_citation", "url": url,
                                        "title": f"Source {number}", "start_index": 0,
                                        "end_index": len(reply.text)}
                                       for number, url in enumerate(reply.sources, 1)]}
        if content is not None:
            output.append({"id": self.new_id("msg"), "type": "message",
                           "status": "incomplete" if reply.truncated else "completed",
                           "role": "assistant", "content": [content]})
        for call in reply.calls:
            output.append({"id": self.new_id("fc"), "type": "function_call",
                           "status": "completed", "arguments": call.arguments,
                           "call_id": self.new_id("call"), "name": call.name})
        return output


def _reasons(body: Mapping[str, Any]) -> bool:
    """Reasoning models think; others only when the request asks for reasoning."""
    model = str(body.get("model") or "")
    return model.startswith(REASONING_MODELS) or isinstance(body.get("reasoning"), Mapping)


def _wants_encrypted(body: Mapping[str, Any]) -> bool:
    include = body.get("include")
    return isinstance(include, list) and "reasoning.encrypted_content" in include


def fixed_unit(body: Mapping[str, Any]) -> str:
    """The prompt's first unit as the cache sees it: instructions and tools (in the
    order sent); the conversation follows, cursor-held or replayed, one unit per item."""
    return canonical_json([body.get("instructions"), body.get("tools") or []])


def item_unit(item: Item) -> str:
    """One conversation item as a prompt-cache unit."""
    return canonical_json(attrs.asdict(item))



def _usage(turn: _Turn, output: Sequence[JsonObject], reply: Reply, cached: int) -> JsonObject:
    output_tokens = estimate_tokens(compact_json(list(output)))
    reasoning = estimate_tokens(reply.reasoning or "") if any(
        item["type"] == "reasoning" for item in output) else 0
    return {
        "input_tokens": turn.input_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": turn.input_tokens + output_tokens,
    }
