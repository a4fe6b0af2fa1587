"""DeepSeek: the Chat Completions codec plus thinking mode, reasoning replay and cache usage.

``DeepSeekAdapter`` subclasses ``ChatCompletionsAdapter`` and changes only its hooks:

* ``extra_fields``: ``"thinking": {"type": "enabled"}`` when the model's registry entry
  says ``thinking``;
* ``reasoning_rule``: where ``reasoning_content`` is written, by the model's
  ``ReasoningReplay`` (``turnstate/core/_registry.py``):

  ============== ===================== ============================== ================
  replay         this turn's loop      history, assistant with calls  other history
  ============== ===================== ============================== ================
  ``none``       never                 never                          never
  ``turn``       always (``""``: none) left out                       left out
  ``tool_turns`` always (``""``: none) its stored reasoning or ``""``  ``""``
  ============== ===================== ============================== ================

  ``turn`` is DeepSeek V3.2 (reasoning is needed inside the tool loop only, and dropping
  it at the next user turn is what the V3.2 sample code does); ``tool_turns`` is V4,
  which wants tool-turn reasoning in every later request and the key on every
  assistant message. Reasoning made by another provider is never sent; reasoning made
  by DeepSeek is sent whatever model name its response carried (a request for
  ``deepseek-reasoner`` is answered as ``deepseek-v4-flash``, and its tool-turn
  reasoning must still go back: plain text, no signature ties it to a model).
* ``read_usage``: ``prompt_cache_hit_tokens`` / ``prompt_cache_miss_tokens`` into
  ``Usage.cache_hit_tokens`` / ``cache_miss_tokens`` and into the audit metadata as
  ``promptCacheHitTokens`` / ``promptCacheMissTokens``.

The stable prefix DeepSeek's context cache needs comes from the base codec: system
prompt first, tools sorted by name with canonical schemas, history rendered
deterministically (identical parts give identical bytes).
"""

from __future__ import annotations

import json

import attrs

from turnstate.core._conversation import TextPart, Usage
from turnstate.core._errors import TransientProviderError
from turnstate.core._json import JsonObject
from turnstate.core._registry import ReasoningReplay
from turnstate.providers._frames import int_field
from turnstate.providers._protocol import HttpRequest, ProviderCall, ProviderResponse
from turnstate.providers.chat_completions._codec import ChatCompletionsAdapter, ReasoningRule
from turnstate.providers.chat_completions._stream import parse_chat_body, read_chat_usage


def _always(text: str, has_calls: bool) -> str:
    return text


def _tool_turns(text: str, has_calls: bool) -> str:
    return text if has_calls else ""


def read_deepseek_usage(raw: JsonObject) -> tuple[Usage, JsonObject]:
    """Chat Completions usage plus DeepSeek's prompt cache hit and miss counts."""
    usage, metadata = read_chat_usage(raw)
    if "prompt_cache_hit_tokens" not in raw and "prompt_cache_miss_tokens" not in raw:
        return usage, metadata
    hit = int_field(raw.get("prompt_cache_hit_tokens"))
    miss = int_field(raw.get("prompt_cache_miss_tokens"))
    usage = attrs.evolve(usage, cached_input_tokens=usage.cached_input_tokens or hit,
                         cache_hit_tokens=hit, cache_miss_tokens=miss)
    return usage, {**metadata, "promptCacheHitTokens": hit, "promptCacheMissTokens": miss}


EMPTY_JSON_OUTPUT = "empty_json_output"
"""The ``code`` of the failure a blank JSON-mode answer is (``checked_response``)."""


def blank_answer(response: ProviderResponse) -> bool:
    """``response`` stopped with no tool call and no text but whitespace."""
    return (response.finish_reason == "stop" and not response.tool_calls
            and not any(type(p) is TextPart and p.text.strip() for p in response.parts))


def json_mode(body: bytes) -> bool:
    """The request body asks for ``response_format`` ``json_object`` (read only for a
    blank answer: the body is decoded then, never on the usual path)."""
    try:
        value = json.loads(body)
    except ValueError:
        return False
    fmt = value.get("response_format") if isinstance(value, dict) else None
    return isinstance(fmt, dict) and fmt.get("type") == "json_object"


def parse_response_body(body: JsonObject) -> ProviderResponse:
    """A non-streaming DeepSeek ``chat.completion`` body → the response it stands for."""
    return parse_chat_body(body, provider=DeepSeekAdapter.PROVIDER,
                           read_usage=read_deepseek_usage)


class DeepSeekAdapter(ChatCompletionsAdapter):
    """DeepSeek's Chat Completions API (``POST {base_url}/chat/completions``).

    Args:
        base_url: the API root, ``https://api.deepseek.com`` by default.
        api_key: sent as ``Authorization: Bearer``; never in reprs, errors or logs.
    """

    DEFAULT_BASE_URL = "https://api.deepseek.com"
    PROVIDER = "deepseek"
    PROMPT_CACHE_KEY = False  # DeepSeek's cache is by prefix only; the field is not its own
    BUG_MARKERS = (
        *ChatCompletionsAdapter.BUG_MARKERS,
        "insufficient tool messages following tool_calls message",
        "`reasoning_content`",
    )

    API_KEY_ENV = "DEEPSEEK_API_KEY"
    MAX_TOKENS_FIELD = "max_tokens"
    REPLAY_ANY_MODEL = True

    def __init__(self, *, base_url: str = DEFAULT_BASE_URL, api_key: str = "",
                 allow_plain_http: bool = False) -> None:
        super().__init__(base_url=base_url, api_key=api_key,
                         allow_plain_http=allow_plain_http)

    def reasoning_rule(self, call: ProviderCall, *, in_loop: bool) -> ReasoningRule | None:
        replay = call.model.reasoning_replay
        if replay is ReasoningReplay.NONE:
            return None
        if in_loop:
            return _always
        return _tool_turns if replay is ReasoningReplay.TOOL_TURNS else None

    def checked_response(self, request: HttpRequest, response: ProviderResponse
                         ) -> ProviderResponse:
        """``response``, unless JSON mode answered blank content.

        DeepSeek's JSON Output guide warns that the API "may occasionally return empty
        content" in JSON mode (its advice: adjust the prompt). Kept, a blank answer
        committed as the reply no JSON parser takes; it is a failure instead, retryable
        (another sample is likely to hold JSON): ``provider_batches`` sends the call again
        when nothing was shown (the transport's policy and the call's budget allowing),
        else the turn fails ``provider_failed`` with this error, for the embedder to send
        again. Its bill is kept as a cut's (the response was whole).

        Raises:
            TransientProviderError: ``code`` ``empty_json_output``.
        """
        if blank_answer(response) and json_mode(request.body):
            raise TransientProviderError(
                self.PROVIDER, "JSON mode answered no content (DeepSeek may return empty "
                "content in JSON mode); send the turn again", code=EMPTY_JSON_OUTPUT)
        return response

    def extra_fields(self, call: ProviderCall) -> JsonObject:
        return {"thinking": {"type": "enabled"}} if call.model.thinking else {}

    def read_usage(self, raw: JsonObject) -> tuple[Usage, JsonObject]:
        return read_deepseek_usage(raw)
