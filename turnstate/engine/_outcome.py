"""How a turn's last provider response and its failures read to the embedder: the
finish reason of a completed turn, and the facts of the provider failure that aborted one.
"""

from __future__ import annotations

import attrs

from turnstate.core._conversation import ToolCallPart
from turnstate.core._errors import ProviderError, RateLimited
from turnstate.core._events import ProviderFailure
from turnstate.core._json import JsonObject
from turnstate.providers._protocol import ProviderResponse
from turnstate.providers._scrub import scrub_text

CUT_FINISHES = frozenset({"length", "content_filter"})
"""Finish reasons that stop an answer where it stood: the output limit, and the
provider's content filter (OpenAI ``incomplete_details.reason: content_filter``, Chat
Completions ``finish_reason: content_filter``), which may stop it inside a call's
arguments and which no tool should act upon either way."""


def cut_at_length(response: ProviderResponse, calls: tuple[ToolCallPart, ...] | None = None
                  ) -> tuple[ProviderResponse, list[JsonObject]]:
    """A response stopped at the output limit or by the content filter
    (``CUT_FINISHES``) ends the turn with what it said: the whole tool calls it made are
    dropped too (never run, never replayed). The parsers already drop a call the limit
    cut in half (``droppedToolCalls`` in their metadata).

    Returns:
        the response without its calls, and the dropped calls as the audit lists them
        (``id``, ``name``, ``reason``; empty: unchanged). ``calls``: the response's tool
        calls when the caller read them already.
    """
    if response.finish_reason not in CUT_FINISHES:
        return response, []
    if calls is None:
        calls = response.tool_calls
    if not calls:
        return response, []
    kept = tuple(p for p in response.parts if not isinstance(p, ToolCallPart))
    reason = response.raw_finish_reason or response.finish_reason or "length"
    dropped: list[JsonObject] = [{"id": c.call_id, "name": c.name, "reason": reason}
                                 for c in calls]
    return attrs.evolve(response, parts=kept), dropped


def failure_of(exc: ProviderError) -> ProviderFailure:
    """The facts of ``exc`` an embedder may show or act on; the code is scrubbed."""
    retry_after = exc.retry_after if isinstance(exc, RateLimited) else None
    return ProviderFailure(
        provider=exc.provider, status=exc.status, error_type=exc.kind,
        code=scrub_text(exc.code)[:200] if exc.code else None,
        retryable=exc.retryable, retry_after=retry_after)
