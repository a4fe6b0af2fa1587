"""The Anthropic emulator's request checks: each refusal the real Messages API gives for a
malformed body (its status and message), as a function of the body."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import attrs

from turnstate.core._json import JsonObject
from turnstate.emulators._prompt_cache import (
    MAX_BREAKPOINTS,
    TOO_MANY_BREAKPOINTS,
    breakpoint_count,
)

UNANSWERED = ("messages.{}: `tool_use` ids were found without `tool_result` blocks immediately "
              "after: {}. Each `tool_use` block must have a corresponding `tool_result` block "
              "in the next message.")
UNEXPECTED = ("messages.{}.content.{}: unexpected `tool_use_id` found in `tool_result` blocks: "
              "{}. Each `tool_result` block must have a corresponding `tool_use` block in the "
              "previous message.")
BAD_SIGNATURE = "messages.{}.content.{}: Invalid `signature` in `thinking` block."
DROPPED_THINKING = (
    "messages.{}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{}`. "
    "When `thinking` is enabled, a final `assistant` message must start with a thinking "
    "block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We "
    "recommend you include thinking blocks from previous turns. To avoid this requirement, "
    "disable `thinking`. Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking")


@attrs.frozen(kw_only=True)
class AnthropicError:
    status: int
    message: str
    type: str = "invalid_request_error"


def blocks_of(message: Mapping[str, Any]) -> list[JsonObject]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def check_breakpoints(body: Mapping[str, Any]) -> AnthropicError | None:
    """At most four ``cache_control`` blocks (the API's 400 beyond that)."""
    count = breakpoint_count(body)
    if count > MAX_BREAKPOINTS:
        return AnthropicError(status=400,
                              message=TOO_MANY_BREAKPOINTS.format(MAX_BREAKPOINTS, count))
    return None


def check_shape(body: Any) -> AnthropicError | None:
    if not isinstance(body, dict):
        return AnthropicError(status=400, message="Request body is not valid JSON.")
    for field in ("model", "max_tokens", "messages"):
        if field not in body:
            return AnthropicError(status=400, message=f"{field}: Field required")
    if not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
        return AnthropicError(status=400, message="max_tokens: Input should be greater than 0")
    if not isinstance(body["messages"], list) or not body["messages"]:
        return AnthropicError(status=400, message="messages: at least one message is required")
    for index, message in enumerate(body["messages"]):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            return AnthropicError(
                status=400, message=f"messages.{index}.role: Input should be 'user' or 'assistant'")
    return None


BAD_TOOL_ID = ("messages.{}.content.{}.tool_use.id: String should match pattern "
               "'^[a-zA-Z0-9_-]+$'")
_TOOL_ID = re.compile(r"[a-zA-Z0-9_-]+").fullmatch


def check_tool_ids(messages: Sequence[Mapping[str, Any]]) -> AnthropicError | None:
    """Every ``tool_use.id`` in the API's pattern (its 400 names the first one outside)."""
    for index, message in enumerate(messages):
        content = message.get("content")
        for position, block in enumerate(content if isinstance(content, list) else ()):
            if (isinstance(block, dict) and block.get("type") == "tool_use"
                    and not _TOOL_ID(str(block.get("id", "")))):
                return AnthropicError(status=400, message=BAD_TOOL_ID.format(index, position))
    return None


EMPTY_TEXT = "messages: text content blocks must be non-empty"
BLANK_TEXT = "messages: text content blocks must contain non-whitespace text"


def check_text_blocks(messages: Sequence[Mapping[str, Any]]) -> AnthropicError | None:
    """No empty text block anywhere, and no message whose text blocks are all whitespace
    (the API's checks; LibreChat-AI/agents#124 probed them: ``[text:' ']`` refused,
    ``[text:' ', text:'real']`` taken)."""
    for message in messages:
        content = message.get("content")
        texts = [b.get("text") for b in content if isinstance(b, dict)
                 and b.get("type") == "text"] if isinstance(content, list) else []
        if any(text == "" for text in texts):
            return AnthropicError(status=400, message=EMPTY_TEXT)
        if texts and all(isinstance(t, str) and t.isspace() for t in texts):
            return AnthropicError(status=400, message=BLANK_TEXT)
    return None


ONE_SAMPLER_MODELS = ("claude-opus-4-1", "claude-opus-4-5", "claude-opus-4-6",
                      "claude-sonnet-4-5", "claude-sonnet-4-6", "claude-haiku-4-5")
"""Models (and their dated snapshots) that refuse ``temperature`` with ``top_p``."""
BOTH_SAMPLERS = ("`temperature` and `top_p` cannot both be specified for this model. "
                 "Please use only one.")


def check_sampling(body: Mapping[str, Any]) -> AnthropicError | None:
    """Claude 4.x from Opus 4.1 and Sonnet 4.5 on take one sampler per request."""
    model = body.get("model")
    both = body.get("temperature") is not None and body.get("top_p") is not None
    if both and isinstance(model, str) and model.startswith(ONE_SAMPLER_MODELS):
        return AnthropicError(status=400, message=BOTH_SAMPLERS)
    return None


BUDGET_OVER_MAX = ("`max_tokens` must be greater than `thinking.budget_tokens`. Please "
                   "consult our documentation at https://docs.claude.com/en/docs/"
                   "build-with-claude/extended-thinking#max-tokens-and-context-window-size")


def check_budget(body: Mapping[str, Any]) -> AnthropicError | None:
    """Extended thinking's budget must stay below ``max_tokens`` (the API's 400)."""
    thinking = body.get("thinking")
    budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
    if type(budget) is int and budget >= body["max_tokens"]:
        return AnthropicError(status=400, message=BUDGET_OVER_MAX)
    return None


FORCED_WITH_THINKING = "Thinking may not be enabled when tool_choice forces tool use."


def check_forced_tool_choice(body: Mapping[str, Any]) -> AnthropicError | None:
    """A ``tool_choice`` of ``any`` or ``tool`` with thinking on: the API's 400 (extended
    thinking takes only ``auto`` and ``none``)."""
    choice = body.get("tool_choice")
    forced = isinstance(choice, dict) and choice.get("type") in ("any", "tool")
    if forced and thinking_enabled(body):
        return AnthropicError(status=400, message=FORCED_WITH_THINKING)
    return None


def _ids(blocks: Sequence[JsonObject], kind: str, key: str) -> list[str]:
    return [str(b.get(key)) for b in blocks if b.get("type") == kind]


def check_tool_pairing(messages: Sequence[Mapping[str, Any]],
                       incomplete: Collection[str] = ()) -> AnthropicError | None:
    """Every ``tool_use`` answered in the next message, every ``tool_result`` answering
    one of the previous message. A call in ``incomplete`` (cut by ``max_tokens``) was
    never made: sent back, it still needs its result, and that result answers nothing."""
    previous_uses: list[str] = []
    for index, message in enumerate(messages):
        blocks = blocks_of(message)
        if message["role"] == "user":
            for position, block in enumerate(blocks):
                use_id = block.get("tool_use_id")
                if block.get("type") == "tool_result" and use_id not in previous_uses:
                    return AnthropicError(status=400,
                                          message=UNEXPECTED.format(index, position, use_id))
        uses = _ids(blocks, "tool_use", "id") if message["role"] == "assistant" else []
        if uses:
            following = blocks_of(messages[index + 1]) if index + 1 < len(messages) else []
            answered = set(_ids(following, "tool_result", "tool_use_id"))
            missing = [u for u in uses if u not in answered]
            if missing:
                return AnthropicError(status=400,
                                      message=UNANSWERED.format(index, ", ".join(missing)))
        previous_uses = [u for u in uses if u not in incomplete]
    return None


def thinking_enabled(body: Mapping[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
