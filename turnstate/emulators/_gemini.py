"""A Gemini Interactions emulator: ``POST /v1beta/interactions`` with stored chains.

It speaks the current "steps" format: input steps validated with Interactions-style
error bodies (``{"error": {"code", "message"}}``), the SSE sequence
``interaction.created``, ``interaction.status_update``, ``step.start`` /
``step.delta`` / ``step.stop`` per step, ``interaction.completed`` and
``event: done`` / ``data: [DONE]``, and the non-streaming interaction body. Every
stored interaction knows its full conversation (the previous one's, this request's
input, this interaction's output steps), so a test can ask what a cursor stands for; it
keeps its own items and a pointer to the one it continues (``_chain``), so a
continuation costs its new steps, not the chain's length.

Using it::

    emulator = GeminiInteractionsEmulator()
    async with EmulatorServer(emulator) as server:
        adapter = GeminiInteractionsAdapter(
            base_url=server.base_url + GeminiInteractionsEmulator.API_PREFIX,
            api_key="test-key")
        ...
    emulator.conversation_for(interaction_id)   # list[Item]
    emulator.expire(interaction_id); emulator.evict_all()
    emulator.faults.push(...); emulator.model.push(Reply(...)); emulator.requests

Rules (the real statuses are UNCONFIRMED in the wire reference; these are the ones
the codec classifies, see ``_errors``):

* unknown, expired, evicted or ``store: false`` ``previous_interaction_id``: 404
  ``not_found`` "Previous interaction with id '...' was not found or has expired.";
  a malformed one (not ``v1_`` + URL-safe base64): 400 ``invalid_argument``
  "Invalid value for previous_interaction_id: '...'.";
* tool pairing over the chained conversation: 400 ``invalid_argument`` with the
  messages the OpenAI API uses ("No tool output found for function call ID." and
  "No tool call found for function call output with call_id ID.");
* a thought signature the emulator never issued (on a ``thought`` or
  ``function_call`` step): 400 ``invalid_argument`` "Corrupted thought signature.";
* a missing ``x-goog-api-key``: 403 ``permission_denied``.
* a model named in ``context_windows`` whose input (on a cursor: the whole stored
  conversation plus the new steps, as ``usage.total_input_tokens`` counts it) passes the
  window: 400 ``invalid_argument`` "The input token count (N) exceeds the maximum number
  of tokens allowed (M)." (the Gemini API's message; the Interactions reference documents
  neither this error nor any server-side compaction, so a stored conversation only grows).
* usage on a cursor turn (``cursor_usage``): ``"incremental"`` (the default, as the
  recordings do) counts the system instruction, the tools and the conversation from its
  latest user input on, though the model reads, and the window counts, the whole stored
  conversation: a new question reports itself alone (the second turn of
  ``multi-turn-stateful``: 12 input tokens), a function result the whole tool loop of its
  turn (``tool-call-step2``: 161, the first step's 53 input, 15 output and 65 thought
  tokens and the result); ``"whole"`` counts the whole conversation, as the
  Interactions docs say.

Every interaction opens with a ``thought`` step carrying a signature alone, as the
recordings do (a thinking model asked nothing about thoughts). ``[[think]]`` gives it a
summary, and the first function call of that interaction carries a signature too (or,
with no calls, the ``model_output`` step does: a ``thought_signature`` delta on it).
Usage is about 4 characters per token; the chained prefix counts as cached.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Literal

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
from turnstate.emulators._gemini_checks import ApiError, _input_steps, _not_found, _tools
from turnstate.emulators._gemini_wire import (
    add_steps,
    signatures_of,
    stream_events,
)
from turnstate.emulators._media import generated_image, token_view
from turnstate.emulators._prompt_cache import AutomaticCache

_INTERACTION_ID = re.compile(r"^v1_[A-Za-z0-9_-]+$")
_ID_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
_EPOCH = datetime(2026, 5, 15, 18, 0, 0, tzinfo=UTC)


@attrs.frozen(kw_only=True)
class StoredInteraction:
    """An interaction kept by the emulator (``store: true``)."""

    id: str
    model: str
    node: ChainNode | None = attrs.field(eq=False, repr=False)
    """The conversation after this interaction: its own items, then the one it continues."""
    body: JsonObject = attrs.field(eq=False)
    context_tokens: int
    turn_tokens_before: int = 0
    """The part of ``context_tokens`` before the latest user input of the chain: what an
    incremental usage leaves out (``_Turn.carried_tokens``)."""

    @property
    def conversation(self) -> tuple[Item, ...]:
        """The whole conversation this interaction stands for (walks the chain)."""
        return tuple(ChainView(self.node))


CursorUsage = Literal["incremental", "whole"]
"""How the emulator's usage counts a cursor turn's input (module docstring)."""


@attrs.frozen(kw_only=True)
class _Turn:
    body: Mapping[str, Any] = attrs.field(eq=False)
    previous: StoredInteraction | None
    node: ChainNode = attrs.field(eq=False)
    """The conversation the model sees: the chain continued by this request's input."""
    tools: Mapping[str, Mapping[str, Any]]
    input_tokens: int
    fixed_tokens: int = 0
    """The system instruction's and tools' share of ``input_tokens``: resent with every
    request, never carried over by ``previous_interaction_id``."""
    carried_tokens: int = 0
    """The stored conversation's share of ``input_tokens`` before the chain's latest user
    input (``previous_interaction_id``): left out of the usage when the emulator reports
    it incrementally."""

    @property
    def conversation(self) -> ChainView:
        return ChainView(self.node)


class GeminiInteractionsEmulator(ChainedEmulator):
    """The Interactions API on loopback. See the module docstring for the rules."""

    API_PREFIX: ClassVar[str] = "/v1beta"
    # google-genai 3.6.1 sends ``/v1/interactions`` by default (the API left preview on
    # 2026-06-19); the wire reference documents ``/v1beta``. Both are served.
    API_PREFIXES: ClassVar[tuple[str, ...]] = ("/v1beta", "/v1")
    RESOURCE: ClassVar[str] = "interactions"
    STREAM_EVENTS = stream_events

    def __init__(self, *, require_auth: bool = True,
                 clock: Callable[[], datetime] | None = None,
                 context_windows: Mapping[str, int] | None = None,
                 cursor_usage: CursorUsage = "incremental") -> None:
        super().__init__()
        if cursor_usage not in ("incremental", "whole"):
            msg = f"cursor_usage must be 'incremental' or 'whole', not {cursor_usage!r}"
            raise ValueError(msg)
        self.cursor_usage: CursorUsage = cursor_usage
        """How a cursor turn's usage counts its input (module docstring)."""
        self.require_auth = require_auth
        # Model name → context window in tokens (a longer input is refused); models not
        # named have no limit.
        self.context_windows: dict[str, int] = dict(context_windows or {})
        self.prompt_cache = AutomaticCache(step=1)
        """Gemini's implicit caching: a repeated prefix of 1,024 tokens or more."""
        self.interactions: dict[str, StoredInteraction] = self.chains
        self._signatures: set[str] = set()
        ticks = itertools.count()
        self._clock = clock or (lambda: _EPOCH + timedelta(seconds=next(ticks)))

    # --- the test API ------------------------------------------------------------------

    def _cached(self, turn: _Turn, after: ChainNode) -> int:
        """Implicit caching: the cached tokens of this request; the prefixes of its
        prompt and of the conversation after its output are remembered. Only this
        request's items are hashed (``prefix_of``)."""
        fixed = fixed_unit(turn.body)
        cached = self.prompt_cache.lookup_prefix("", prefix_of(turn.node, fixed, item_unit),
                                                 turn.input_tokens)
        added = len(turn.node.items) + len(after.items) + 1
        self.prompt_cache.store_prefix("", prefix_of(after, fixed, item_unit), added)
        return cached

    def new_interaction_id(self) -> str:
        number = self.next_number("v1")
        token = base64.urlsafe_b64encode(f"emulated-{self.id_tag}-{number:06d}".encode())
        return "v1_" + token.decode().rstrip("=")

    def new_call_id(self) -> str:
        # Eight lowercase letters and digits, like the real ids ("61nzpsv4").
        value = (self.next_number("call") * 2_654_435_761) % 36**8
        digits = []
        for _ in range(8):
            value, rest = divmod(value, 36)
            digits.append(_ID_ALPHABET[rest])
        return "".join(reversed(digits))

    # --- handlers ----------------------------------------------------------------------

    def _unknown(self, chain_id: str) -> web.Response:
        return _not_found(chain_id).response()

    def _deleted(self, chain_id: str) -> JsonObject:
        return {}

    def _check_auth(self, request: web.Request) -> None:
        if self.require_auth and not request.headers.get("x-goog-api-key", "").strip():
            message = ("Method doesn't allow unregistered callers (callers without established "
                       "identity). Please use API Key or other form of API consumer identity "
                       "to call this API.")
            raise ApiError(403, "permission_denied", message)

    # --- request rules -----------------------------------------------------------------

    def _prepare(self, recorded: RecordedRequest) -> _Turn:
        body = recorded.json
        if not isinstance(body, dict):
            raise ApiError(400, "invalid_argument", "Invalid JSON payload received.")
        if not isinstance(body.get("model"), str) or not body["model"]:
            raise ApiError(400, "invalid_argument", "model is required.")
        steps = _input_steps(body.get("input"))
        self._check_signatures(steps)
        previous = self._previous(body.get("previous_interaction_id"))
        builder = ChainBuilder(previous.node if previous else None)
        add_steps(builder, steps)
        problem = builder.pairing_problem()
        if problem:
            raise ApiError(400, "invalid_argument", problem)
        fixed = self.scaled(estimate_tokens(str(body.get("system_instruction") or ""),
                                            compact_json(body.get("tools") or [])))
        context = previous.context_tokens if previous else 0
        # Incremental usage (module docstring) counts from the chain's latest user input.
        carried = 0
        if previous is not None:
            asks = any(step.get("type") == "user_input" for step in steps)
            carried = previous.context_tokens if asks else previous.turn_tokens_before
        total = fixed + context + self.scaled(
            estimate_tokens(compact_json(token_view(steps, "gemini"))))
        self._check_window(body["model"], total)
        return _Turn(body=body, previous=previous, node=builder.node(),
                     tools=_tools(body.get("tools")), input_tokens=total, fixed_tokens=fixed,
                     carried_tokens=carried)

    def _check_window(self, model: str, tokens: int) -> None:
        window = self.context_windows.get(model)
        if window is not None and tokens > window:
            message = (f"The input token count ({tokens}) exceeds the maximum number of "
                       f"tokens allowed ({window}).")
            raise ApiError(400, "invalid_argument", message)

    def _previous(self, cursor: Any) -> StoredInteraction | None:
        if cursor is None:
            return None
        if not isinstance(cursor, str) or not _INTERACTION_ID.match(cursor):
            message = f"Invalid value for previous_interaction_id: '{cursor}'."
            raise ApiError(400, "invalid_argument", message)
        if not self.stored(cursor):
            raise _not_found(cursor)
        return self.interactions[cursor]

    def _check_signatures(self, steps: Sequence[Mapping[str, Any]]) -> None:
        if any(sig not in self._signatures for sig in signatures_of(steps)):
            raise ApiError(400, "invalid_argument", "Corrupted thought signature.")

    # --- the answer --------------------------------------------------------------------

    def _respond(self, turn: _Turn, reply: Reply) -> JsonObject:
        interaction_id = self.new_interaction_id()
        steps = self._steps(interaction_id, reply)
        builder = ChainBuilder(turn.node)
        add_steps(builder, steps)
        after = builder.node()
        now = self._clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        store = turn.body.get("store") is not False
        interaction: JsonObject = {
            "id": interaction_id,
            "status": _status(reply),
            "usage": _usage(turn, steps, reply, self._cached(turn, after),
                            self.cursor_usage == "incremental"),
            "created": now, "updated": now, "service_tier": "standard",
            "steps": steps, "object": "interaction", "model": turn.body["model"],
        }
        if turn.previous is not None:
            interaction["previous_interaction_id"] = turn.previous.id
        if store:
            self._signatures.update(signatures_of(steps))
            output_tokens = self.scaled(estimate_tokens(compact_json(steps)))
            self.interactions[interaction_id] = StoredInteraction(
                id=interaction_id, model=turn.body["model"], node=after,
                body=interaction,
                context_tokens=turn.input_tokens + output_tokens - turn.fixed_tokens,
                turn_tokens_before=turn.carried_tokens)
        return interaction

    def _steps(self, interaction_id: str, reply: Reply) -> list[JsonObject]:
        # Every interaction opens with a thought step, as the recordings of a thinking
        # model asked nothing about thoughts do (``basic``, ``tool-call-step1``, ...: a
        # ``thought`` step whose only delta is its ``thought_signature``); ``[[think]]``
        # adds its summary and signs the first call or the text (wire10).
        thought: JsonObject = {"type": "thought", "signature": _signature(interaction_id, 0)}
        steps: list[JsonObject] = [thought]
        signature: str | None = None
        if reply.reasoning:
            signature = thought["signature"]
            thought["summary"] = [{"type": "text", "text": reply.reasoning}]
        if reply.search:
            search_id = f"gs{self.next_number('search'):06d}"
            steps.append({"type": "google_search_call", "id": search_id,
                          "arguments": {"queries": [reply.search]}})
            steps.append({"type": "google_search_result", "call_id": search_id, "result": [
                {"title": f"About {reply.search}", "url": "https://search.example/1"}]})
        if reply.text or reply.images:
            output: JsonObject = {"type": "model_output", "content": [
                *([{"type": "text", "text": reply.text}] if reply.text else []),
                *(generated_image(interaction_id, n) for n in range(reply.images))]}
            if signature is not None and not reply.calls:
                # A thinking answer without calls signs its text (as generateContent signs
                # the last part); UNCONFIRMED for Interactions steps.
                output["signature"] = _signature(interaction_id, len(steps))
            steps.append(output)
        for index, call in enumerate(reply.calls):
            step: JsonObject = {"type": "function_call", "id": self.new_call_id(),
                                "name": call.name, "arguments": _object(call.arguments)}
            if signature is not None and index == 0:
                step["signature"] = _signature(interaction_id, len(steps))
            steps.append(step)
        return steps


def _status(reply: Reply) -> str:
    if reply.truncated:  # cut at the limit, calls made before it or not
        return "incomplete"
    return "requires_action" if reply.calls else "completed"


def _signature(interaction_id: str, index: int) -> str:
    return base64.b64encode(f"emulated-signature:{interaction_id}:{index}".encode()).decode()


def _object(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return {"arguments": arguments}


def fixed_unit(body: Mapping[str, Any]) -> str:
    """The prompt's first unit as the implicit cache sees it: system instruction and
    tools (in the order sent); the conversation follows, one unit per item."""
    return canonical_json([body.get("system_instruction"), body.get("tools") or []])


def item_unit(item: Item) -> str:
    """One conversation item as a prompt-cache unit."""
    return canonical_json(attrs.asdict(item))


def _usage(turn: _Turn, steps: Sequence[JsonObject], reply: Reply, cached: int,
           incremental: bool) -> JsonObject:
    thought = estimate_tokens(reply.reasoning or "") if reply.reasoning else 0
    visible = [s for s in steps if s["type"] != "thought"]
    output = estimate_tokens(compact_json(visible))
    # Incremental (real Gemini on a cursor turn): the stored conversation is read, not counted.
    carried = turn.carried_tokens if incremental else 0
    reported = turn.input_tokens - carried
    return {
        "total_tokens": reported + output + thought,
        "total_input_tokens": reported,
        "input_tokens_by_modality": [{"modality": "text", "tokens": reported}],
        "total_cached_tokens": max(0, cached - carried),
        "total_output_tokens": output,
        "total_tool_use_tokens": 0,
        "total_thought_tokens": thought,
    }
