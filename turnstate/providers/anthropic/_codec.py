"""Anthropic Messages: the adapter (request body, thinking budget, betas, errors, loop).

The content blocks it writes, and their rules, are in ``_blocks``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from turnstate.core._compaction import history_from_compaction
from turnstate.core._conversation import Message, ToolResultPart
from turnstate.core._errors import ConfigurationError, ProviderError
from turnstate.core._generation import GenerationSettings
from turnstate.core._json import JsonObject, compact_json
from turnstate.core._media import DeferredMedia, deferred_media
from turnstate.core._registry import ModelInfo
from turnstate.providers._adapters import StatelessAdapter
from turnstate.providers._errors import (
    CONTEXT_LENGTH_MESSAGE,
    context_length_error,
    error_fields,
    status_error,
)
from turnstate.providers._frames import text_of
from turnstate.providers._protocol import HttpRequest, ProviderCall, ProviderResponse
from turnstate.providers._requests import (
    check_base_url,
    check_key_transport,
    json_body_request,
    key_or_env,
)
from turnstate.providers._settings import anthropic_fields
from turnstate.providers._tool_calls import distinct_history_ids
from turnstate.providers.anthropic._blocks import (
    OPENINGS,
    compacted_head,
    loop_blocks,
    push_history,
    push_message,
    render_parts,
    render_tools,
)
from turnstate.providers.anthropic._cache import (
    MAX_BREAKPOINTS,
    CachePlan,
    Spot,
    WarmPrefixes,
    cacheable_plan,
    marked_tools,
    place_breakpoints,
    plan_for,
    spot_of,
    system_json,
)
from turnstate.providers.anthropic._compaction import (
    BETA,
    context_management,
    loop_from_compaction,
    sends_compaction,
    wants_compaction,
)
from turnstate.providers.anthropic._stream import (
    AnthropicStreamParser,
    error_from_type,
    log_if_bug,
)
from turnstate.providers.anthropic._user_blocks import user_json
from turnstate.providers.chat_completions._codec import (
    join_body,
    quote,
)

MIN_THINKING_BUDGET = 1024


def _last_question(history: Sequence[Message]) -> int | None:
    """The index of the last user message of ``history`` (None without one)."""
    for index in range(len(history) - 1, -1, -1):
        if history[index].role == "user":
            return index
    return None


def classify_anthropic_error(
    provider: str, status: int, headers: Mapping[str, str], body: bytes
) -> ProviderError:
    """``{"type": "error", "error": {type, message}}`` → the error tree, by status; one
    sent with a 2xx status (instead of the stream asked for) by its type, as in a
    stream. A 400 "prompt is too long: N tokens > M maximum" is ``ContextLengthExceeded``
    with both figures."""
    fields = error_fields(body)
    if 200 <= status < 300:
        return error_from_type(provider, fields, status)
    detail = text_of(fields.get("message")) or f"HTTP {status}"
    code = text_of(fields.get("type"))
    if status == 400 and CONTEXT_LENGTH_MESSAGE.search(detail):  # "prompt is too long: ..."
        return context_length_error(provider, detail, status=status, code=code)
    if status == 400:
        log_if_bug(provider, detail)
    return status_error(provider, status, headers, detail, code)


class AnthropicAdapter(StatelessAdapter):
    """The Anthropic Messages API, a stateless provider run as a local loop.

    Args:
        base_url: the API root; requests go to ``{base_url}/messages``.
        api_key: sent as ``x-api-key``; never in reprs, errors or logs.
        max_tokens: the request's ``max_tokens``.
        thinking_budget_tokens: when set and the model supports thinking, requests
            carry ``{"type": "enabled", "budget_tokens": N}``.
        allow_plain_http: take a plain ``http`` ``base_url`` to another host than this
            machine with a key (``check_key_transport``); refused by default.

    Raises:
        ConfigurationError: ``max_tokens`` is not positive, the thinking budget is
            below 1,024 tokens or not below ``max_tokens``, or the key would go out in
            clear.
    """

    DEFAULT_BASE_URL = "https://api.anthropic.com/v1"
    PATH = "/messages"
    PROVIDER = "anthropic"
    API_VERSION = "2023-06-01"

    def __init__(
        self,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str = "",
        max_tokens: int = 4096,
        thinking_budget_tokens: int | None = None,
        allow_plain_http: bool = False,
    ) -> None:
        if max_tokens < 1:
            msg = f"max_tokens must be positive, got {max_tokens}"
            raise ConfigurationError(msg)
        budget = thinking_budget_tokens
        if budget is not None and not MIN_THINKING_BUDGET <= budget < max_tokens:
            msg = (f"thinking_budget_tokens must be at least {MIN_THINKING_BUDGET} and below "
                   f"max_tokens ({max_tokens}), got {budget}")
            raise ConfigurationError(msg)
        check_base_url(self, None, base_url)
        self._url = base_url.rstrip("/") + self.PATH
        self._api_key = key_or_env(api_key, "ANTHROPIC_API_KEY")
        check_key_transport(base_url, self._api_key, allow_plain_http=allow_plain_http)
        self.max_tokens = max_tokens
        self.thinking_budget_tokens = budget
        self.warm_prefixes = WarmPrefixes()

    def __repr__(self) -> str:
        return f"AnthropicAdapter(url={self._url!r}, max_tokens={self.max_tokens})"

    @property
    def provider(self) -> str:
        return self.PROVIDER

    @property
    def url(self) -> str:
        return self._url

    def messages_json(self, call: ProviderCall, plan: CachePlan | None = None,
                      prefix_chars: int = 0, room: int = MAX_BREAKPOINTS,
                      media: DeferredMedia | None = None) -> list[str]:
        """The rendered history, the user's message and the loop, roles merged (JSON
        each), with at most ``room`` breakpoints where ``plan`` asks for them
        (``prefix_chars``: the tools' and system's characters before the messages;
        ``_cache`` says where they go; ``media``: the marks written in place of the
        media's base64, counted as it).

        From the latest compaction point on: a compaction this turn's loop made leaves
        out everything before it, else one in the history leaves out the history before
        it (the API drops what precedes a compaction block; docs/decisions.md).
        """
        plan = plan or CachePlan()
        from_loop = loop_from_compaction(call.loop_messages)
        if from_loop is not None:  # no history, no question: the loop's results alone
            out: list[str] = []
            question, asked_before, last, loop = None, None, "", from_loop
        else:
            out, asked_before = self.history_json(call, with_spot=plan.enabled)
            last = "user" if out and out[-1].startswith(OPENINGS["user"]) else ""
            last = push_message(out, last, "user", user_json(call.user_content, call.model))
            question, loop = spot_of(out), list(call.loop_messages)
        results: list[Spot] = []
        for kind, blocks in map(loop_blocks, loop):
            last = push_message(out, last, kind, ",".join(blocks))
            if kind == "user":
                results.append(spot_of(out))
        if plan.enabled:
            place_breakpoints(out, plan, prefix_chars,
                              [*results[:-3:-1], question, asked_before], room, media=media)
        return out

    def history_json(self, call: ProviderCall, *,
                     with_spot: bool = False) -> tuple[list[str], Spot | None]:
        """The committed history from its latest compaction point, as messages (compact
        JSON each), roles merged; with ``with_spot``, where its last user message ends
        (None without one)."""
        out: list[str] = []
        last = ""
        history: Sequence[Message] = distinct_history_ids(call.history)
        cut = history_from_compaction(history, self.PROVIDER, call.model.name)
        if cut is not None:
            head, history = cut
            for kind, joined in compacted_head(head):
                last = push_message(out, last, kind, joined)
        asked = _last_question(history) if with_spot else None
        if asked is None:
            push_history(out, last, history, call.model)
            return out, None
        last = push_history(out, last, history[:asked + 1], call.model)
        spot = spot_of(out)
        push_history(out, last, history[asked + 1:], call.model)
        return out, spot

    def body(self, call: ProviderCall) -> bytes:
        """The request body: exactly what ``compact_json`` writes for the payload.

        Written with each inline image's or file's base64 as a mark
        (``core._media.deferred_media``), which ``spliced`` replaces in the body's bytes:
        the base64 is made once, as bytes, instead of as the blocks' text, the joined
        messages' text and the body's bytes (5.0x the image at the request's peak,
        now 3.7x; memory8). The breakpoints count each mark as its base64."""
        with deferred_media() as media:
            written = self.written_body(call, media)
        return media.spliced(written)

    def written_body(self, call: ProviderCall, media: DeferredMedia | None = None) -> bytes:
        """``body`` with the marks of ``media`` in place of the media's base64 (the
        base64 itself without ``media``)."""
        max_tokens = call.generation.max_output_tokens or self.room(call)
        head = f'{{"model":{quote(call.model.name)},"max_tokens":{max_tokens},'
        plan = plan_for(call)
        tools = render_tools(call.tools)
        tools_json = compact_json(tools) if tools else ""
        prefix_chars = len(tools_json) + len(call.system_prompt)
        control = self.prefix_control(call, plan, tools_json, prefix_chars)
        if call.system_prompt:
            head += f'"system":{system_json(call.system_prompt, control)},'
        elif tools_json and control is not None:
            tools_json = marked_tools(tools_json, control)
        tail = ["]"]
        if tools_json:
            tail.append(',"tools":' + tools_json)
        tail += ["," + quote(key) + ":" + compact_json(value) for key, value in
                 anthropic_fields(call.generation, has_tools=bool(tools_json)).items()]
        budget = self.thinking_budget(call, max_tokens)
        if budget is not None:
            tail.append(',"thinking":' + compact_json(
                {"type": "enabled", "budget_tokens": budget}))
        if wants_compaction(call):
            tail.append(',"context_management":' + compact_json(context_management(call)))
        tail.append(',"stream":true}')
        room = MAX_BREAKPOINTS - (control is not None)
        return join_body(head + '"messages":[',
                         self.messages_json(call, plan, prefix_chars, room, media),
                         "".join(tail))

    def prefix_control(self, call: ProviderCall, plan: CachePlan, tools_json: str,
                       prefix_chars: int) -> str | None:
        """The ``cache_control`` of the tools-and-system breakpoint, None for none. A
        chat's first request (``plan`` empty) gets it only when the same prefix went out
        marked recently (``WarmPrefixes``): it then reads what another chat wrote."""
        first = not plan.enabled and call.cache.enabled
        if first:
            plan = cacheable_plan(call)
        if not plan.fits(prefix_chars):
            return None
        key = (call.model.name, plan.control, call.system_prompt, tools_json)
        if first and not self.warm_prefixes.warm(key, call.cache.ttl):
            return None
        self.warm_prefixes.sent(key)
        return plan.control

    def room(self, call: ProviderCall) -> int:
        """``max_tokens`` of a turn that names no output limit: the adapter's, or, for a
        turn's thinking budget at or above it (which Anthropic refuses: the budget must
        stay below ``max_tokens``), the budget plus the adapter's for the answer, the
        model's output limit at most (the registry keeps the budget below it)."""
        budget = call.generation.reasoning_budget_tokens
        if budget is None or budget < self.max_tokens or not call.model.thinking:
            return self.max_tokens
        return min(budget + self.max_tokens, call.model.max_output_tokens)

    def thinking_budget(self, call: ProviderCall, max_tokens: int) -> int | None:
        """The turn's budget, else the adapter's when it fits below ``max_tokens``
        (a turn that lowers the output limit under it runs without thinking)."""
        if not call.model.thinking:
            return None
        budget = call.generation.reasoning_budget_tokens
        if budget is not None:
            return budget
        return self._default_budget(max_tokens)

    def _default_budget(self, max_tokens: int) -> int | None:
        default = self.thinking_budget_tokens
        return default if default is not None and default < max_tokens else None

    def thinks_by_default(self, settings: GenerationSettings, model: ModelInfo) -> bool:
        """Whether this adapter's own budget turns thinking on for a turn with
        ``settings`` (no budget of its own) on ``model`` (``ThinksByDefault``)."""
        if not model.thinking or settings.reasoning_budget_tokens is not None:
            return False
        return self._default_budget(settings.max_output_tokens or self.max_tokens) is not None

    def betas(self, call: ProviderCall) -> list[str]:
        """The ``anthropic-beta`` names this request needs (comma-joined in the header)."""
        sends = sends_compaction(call, self.PROVIDER)
        return [BETA] if wants_compaction(call) or sends else []

    def build_request(self, call: ProviderCall) -> HttpRequest:
        headers = {"anthropic-version": self.API_VERSION}
        betas = self.betas(call)
        if betas:
            headers["anthropic-beta"] = ",".join(betas)
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return json_body_request(self.PROVIDER, self._url, headers, self.body(call))

    def stream_parser(self) -> AnthropicStreamParser:
        return AnthropicStreamParser(self.PROVIDER)

    def classify_error(
        self, status: int, headers: Mapping[str, str], body: bytes
    ) -> ProviderError:
        return classify_anthropic_error(self.PROVIDER, status, headers, body)

    def extend_loop(
        self,
        call: ProviderCall,
        response: ProviderResponse,
        results: Sequence[ToolResultPart],
    ) -> tuple[JsonObject, ...]:
        rendered = render_parts((*response.parts, *results), (self.PROVIDER, call.model.name))
        return (*call.loop_messages, *rendered)

