"""Anthropic's ``stop_reason: "pause_turn"`` (providers-wire.md 5.3) as a typed end."""

from __future__ import annotations

from turnstate.core._errors import FatalProviderError

PAUSED_STOP_REASONS = frozenset({"pause_turn"})
"""The API paused a long server-tool turn (5.3): the content so far (often a
``server_tool_use`` without its result) is no answer, and Anthropic continues it only
when it comes back as the last, assistant, message of a new request. turnstate sends no
server tools and its loop continues only after tool results, so the pause ends the turn
typed (``paused_error``), nothing of it committed or replayed."""


def paused_error(provider: str, stop_reason: str) -> FatalProviderError:
    """The typed end of a paused turn (``code`` the stop reason; not retryable: the
    same request pauses again)."""
    msg = (f"the API paused the turn (stop_reason {stop_reason!r}: a server tool ran "
           "long); turnstate does not continue paused turns")
    return FatalProviderError(provider, msg, code=stop_reason)
