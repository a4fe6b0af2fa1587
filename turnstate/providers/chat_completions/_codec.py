"""Chat Completions requests: the persisted history and the turn's loop as messages.

Rendering rules (DeepSeek subclasses the adapter and changes only the hooks):

* the system prompt is the first message, then the history, the user's new message and
  this turn's loop messages;
* a user message is ``{"role": "user", "content": text}``;
* an assistant message's parts are split at tool-result boundaries: each segment
  becomes one assistant message (its text joined as ``content``, ``null`` when it has
  none; its calls as ``tool_calls``) followed by one ``tool`` message per result, in
  order. A segment with neither text nor calls is left out. A call id past OpenAI's 40
  characters (another server's) is sent shortened, ``call_id_json``;
* ``reasoning_content`` is written only where ``reasoning_rule`` says so; plain Chat
  Completions never sends reasoning back;
* tools are sorted by name and their schemas' keys sorted recursively, so a request's
  bytes never depend on the order the caller lists its tools in.

``extend_loop`` renders a tool iteration with the same ``render_parts_json`` as the
history, so the loop's messages are byte-identical in every later request of the turn.
A stateless call ignores ``cursor`` and ``tool_results``: the results travel in
``loop_messages``.

The fragments (tools, parts, user content, the body's join) are written by ``_render``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

import attrs

from turnstate.core._conversation import TextPart, ToolResultPart, Usage
from turnstate.core._errors import ProviderError
from turnstate.core._json import JsonObject, compact_json
from turnstate.core._media import deferred_media
from turnstate.providers._adapters import StatelessAdapter
from turnstate.providers._protocol import HttpRequest, ProviderCall, ProviderResponse
from turnstate.providers._requests import (
    check_base_url,
    check_key_transport,
    json_body_request,
    key_or_env,
)
from turnstate.providers._settings import chat_fields
from turnstate.providers._tool_calls import distinct_history_ids
from turnstate.providers.chat_completions._dialect import (
    OPENAI_DIALECT,
    REFUSALS,
    REFUSED_KEY,
    ChatDialect,
    FieldRefused,
    amended_body,
)
from turnstate.providers.chat_completions._errors import classify_chat_error
from turnstate.providers.chat_completions._render import (
    NO_REASONING,
    USER_ROLE,
    ReasoningPolicy,
    ReasoningRule,
    _plain_tail,
    canonical_schema,
    dumps_compact,
    join_body,
    quote,
    render_parts,
    render_parts_json,
    render_tools,
    user_content_json,
)
from turnstate.providers.chat_completions._stream import (
    ChatCompletionsStreamParser,
    read_chat_usage,
)

__all__ = ["USER_ROLE", "ChatCompletionsAdapter", "ReasoningPolicy", "ReasoningRule",
           "canonical_schema", "dumps_compact", "join_body", "quote", "render_parts",
           "render_parts_json", "render_tools"]

logger = logging.getLogger("turnstate")


class ChatCompletionsAdapter(StatelessAdapter):
    """OpenAI-compatible Chat Completions, a stateless provider run as a local loop.

    Args:
        base_url: the API root; requests go to ``{base_url}/chat/completions``.
        api_key: sent as ``Authorization: Bearer``; never in reprs, errors or logs.
        prompt_cache_key: whether to send OpenAI's ``prompt_cache_key``. None (the
            default) sends it only to OpenAI's own API (host ``api.openai.com``): strict
            OpenAI-compatible servers (Groq, Cerebras, NVIDIA NIM, ...) answer 400/422
            for a field they do not know, which failed every turn.
        allow_plain_http: take a plain ``http`` ``base_url`` to another host than this
            machine with a key (a LAN gateway; ``check_key_transport``); refused by default.

    Subclasses (DeepSeek) change the class attributes and the hooks ``reasoning_rule``,
    ``extra_fields`` and ``read_usage``.
    """

    DEFAULT_BASE_URL = "https://api.openai.com/v1"
    PATH = "/chat/completions"
    PROVIDER = "openai-compatible"
    PROMPT_CACHE_KEY = True
    """Send ``prompt_cache_key`` (the chat's hashed cache key) so OpenAI routes a chat's
    requests to one prompt cache; a subclass for an API that has no such field turns
    it off. Even when on, it goes only to ``OPENAI_HOSTS`` unless the caller opts in."""
    OPENAI_HOSTS = frozenset({"api.openai.com"})
    """Hosts known to accept OpenAI-only request fields (``prompt_cache_key``)."""
    BUG_MARKERS: tuple[str, ...] = (
        "must be followed by tool messages responding to each 'tool_call_id'",
        "must be a response to a preceeding message with 'tool_calls'",
        "must be a response to a preceding message with 'tool_calls'",
    )

    API_KEY_ENV = "OPENAI_API_KEY"
    """Where the API key comes from when none is given."""
    MAX_TOKENS_FIELD = "max_completion_tokens"
    """The field ``GenerationSettings.max_output_tokens`` is sent as."""

    def __init__(self, *, base_url: str = DEFAULT_BASE_URL, api_key: str = "",
                 prompt_cache_key: bool | None = None,
                 dialect: ChatDialect | None = None, allow_plain_http: bool = False) -> None:
        check_base_url(self, None, base_url)
        self._url = base_url.rstrip("/") + self.PATH
        self._api_key = key_or_env(api_key, self.API_KEY_ENV)
        check_key_transport(base_url, self._api_key, allow_plain_http=allow_plain_http)
        if prompt_cache_key is None:
            prompt_cache_key = urlsplit(base_url).hostname in self.OPENAI_HOSTS
        self._cache_key_field = self.PROMPT_CACHE_KEY and prompt_cache_key
        self.dialect = dialect or attrs.evolve(OPENAI_DIALECT,
                                               max_tokens_field=self.MAX_TOKENS_FIELD)
        """The optional fields the server takes, as given (``_dialect``)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self._url!r})"

    @property
    def provider(self) -> str:
        return self.PROVIDER

    @property
    def url(self) -> str:
        return self._url

    # --- hooks ---------------------------------------------------------------------

    def reasoning_rule(self, call: ProviderCall, *, in_loop: bool) -> ReasoningRule | None:
        """How ``reasoning_content`` is written in the history or in the loop (None: never)."""
        return None

    def extra_fields(self, call: ProviderCall) -> JsonObject:
        """Provider-specific request fields, placed after ``tools``."""
        return {}

    def read_usage(self, raw: JsonObject) -> tuple[Usage, JsonObject]:
        """A ``usage`` object → engine usage and the audit metadata it contributes."""
        return read_chat_usage(raw)

    # --- requests ------------------------------------------------------------------

    REPLAY_ANY_MODEL = False
    """Whether history reasoning made by another model of this provider is replayed
    (this turn's loop always replays what the provider returned)."""

    def policy(self, call: ProviderCall, *, in_loop: bool) -> ReasoningPolicy:
        rule = self.reasoning_rule(call, in_loop=in_loop)
        if rule is None:
            return NO_REASONING
        return ReasoningPolicy(rule=rule, provider=self.PROVIDER, model=call.model.name,
                               any_model=in_loop or self.REPLAY_ANY_MODEL)

    def messages_json(self, call: ProviderCall) -> list[str]:
        """System, rendered history, the user's message, then the loop (compact JSON each)."""
        out: list[str] = []
        if call.system_prompt:
            out.append('{"role":"system","content":' + quote(call.system_prompt) + "}")
        policy = self.policy(call, in_loop=False)
        plain_tail = _plain_tail(policy.rule)
        append = out.append
        for message in distinct_history_ids(call.history):  # the hot loop of a replay
            parts, role = message.parts, message.role
            first = parts[0] if len(parts) == 1 else None
            if role is USER_ROLE or role == "user":
                content = quote(first.text) if type(first) is TextPart else user_content_json(
                    parts, call.model)
                append(f'{{"role":"user","content":{content}}}')
            elif type(first) is TextPart:
                if first.text:
                    append(f'{{"role":"assistant","content":{quote(first.text)}{plain_tail}')
            else:
                out += render_parts_json(parts, policy)
        out.append('{"role":"user","content":' + user_content_json(call.user_content, call.model)
                   + "}")
        out += [dumps_compact(m) for m in call.loop_messages]
        return out

    def body(self, call: ProviderCall) -> bytes:
        """The request body: exactly what ``compact_json`` writes for the payload."""
        tail = ["]"]
        tools = render_tools(call.tools)
        if tools:
            tail.append(',"tools":' + compact_json(tools))
        dialect, refused = self.dialect, REFUSALS.of(self._url)
        if refused is not None:  # the server refused a field before: go without it
            dialect = dialect.without(refused)
        fields = {**self.extra_fields(call), **chat_fields(
            call.generation, has_tools=bool(tools), max_tokens_field=dialect.max_tokens_field)}
        tail += ["," + quote(key) + ":" + compact_json(value) for key, value in fields.items()]
        if (self._cache_key_field and call.cache.enabled and call.cache_key
                and (refused is None or "prompt_cache_key" not in refused)):
            tail.append(',"prompt_cache_key":' + quote(call.cache_key))
        tail.append(dialect.stream_tail())
        messages = self.messages_json(call)
        return join_body('{"model":' + quote(call.model.name) + ',"messages":[', messages,
                         "".join(tail))

    def build_request(self, call: ProviderCall) -> HttpRequest:
        headers = {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        with deferred_media() as media:  # the user's media as marks, spliced (memory7)
            body = self.body(call)
        return json_body_request(self.PROVIDER, self._url, headers, media.spliced(body))

    def stream_parser(self) -> ChatCompletionsStreamParser:
        refused = REFUSALS.of(self._url)
        notes = {REFUSED_KEY: sorted(refused)} if refused is not None else None
        return ChatCompletionsStreamParser(self.PROVIDER, self.read_usage, notes)

    def amended_request(self, request: HttpRequest, failure: ProviderError
                        ) -> HttpRequest | None:
        """``request`` sent again without the optional field ``failure`` refuses
        (``_dialect.FieldRefused``), the refusal remembered for this URL; else None."""
        if not isinstance(failure, FieldRefused):
            return None
        body = amended_body(request.body, failure.field,
                            REFUSALS.of(self._url) or frozenset())
        if body is None:
            return None
        REFUSALS.learn(self._url, failure.field)
        return attrs.evolve(request, body=body, budget=None)

    def classify_error(
        self, status: int, headers: Mapping[str, str], body: bytes
    ) -> ProviderError:
        return classify_chat_error(self.PROVIDER, status, headers, body, self.BUG_MARKERS)

    def extend_loop(
        self,
        call: ProviderCall,
        response: ProviderResponse,
        results: Sequence[ToolResultPart],
    ) -> tuple[JsonObject, ...]:
        rendered = render_parts((*response.parts, *results), self.policy(call, in_loop=True))
        return (*call.loop_messages, *rendered)

