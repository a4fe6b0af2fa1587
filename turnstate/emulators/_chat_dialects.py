"""What OpenAI-compatible servers stream differently from OpenAI's own API, by model.

The Chat Completions emulator answers a request in the dialect its model names
(``dialect_of``, longest matching prefix): OpenAI's by default;
Gemini's OpenAI-compatible endpoint for ``gemini-*`` (each tool call whole in one
chunk with ``"id": ""`` and no ``index``); OpenRouter, Groq and gpt-oss servers for
``gpt-oss-*`` and ``openai/gpt-oss-*`` (reasoning as ``delta.reasoning``, and Groq's
400 for an assistant message that carries ``reasoning_content``).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs


@attrs.frozen(kw_only=True)
class Dialect:
    """One server family's differences.

    Attributes:
        name: for messages and tests.
        reasoning_field: the delta (and message) key reasoning streams under; None:
            the server streams no reasoning.
        anonymous_calls: tool calls stream whole, one chunk each, ``"id": ""`` and no
            ``index`` (the client makes its own ids).
        refused_fields: assistant-message keys the server rejects with a 400.
        refused_request_fields: top-level request keys the server rejects with a 400,
            as older vLLM does (``EXTRA_FORBIDDEN``); without ``stream_options`` it
            sends no usage chunk, as OpenAI does not.
    """

    name: str
    reasoning_field: str | None = None
    anonymous_calls: bool = False
    refused_fields: tuple[str, ...] = ()
    refused_request_fields: tuple[str, ...] = ()


OPENAI = Dialect(name="openai")
GEMINI_OPENAI = Dialect(name="gemini-openai", anonymous_calls=True)
REASONING_FIELD = Dialect(name="reasoning-field", reasoning_field="reasoning",
                          refused_fields=("reasoning_content",))
STRICT_LEGACY = Dialect(name="strict-legacy",
                        refused_request_fields=("max_completion_tokens", "stream_options"))
"""An older vLLM (``extra="forbid"``): OpenAI's newer fields refused; not in ``DIALECTS``
(a test maps a model to it)."""

DIALECTS: Mapping[str, Dialect] = {
    "gemini-": GEMINI_OPENAI,
    "gpt-oss-": REASONING_FIELD,
    "openai/gpt-oss-": REASONING_FIELD,
}
"""Model-name prefix → dialect (the emulator's default table)."""

REFUSED_FIELD = ("'messages.{0}' : for 'role:assistant' the following must be "
                 "satisfied[('messages.{0}' : property '{1}' is unsupported)]")
"""Groq's 400 text for an unknown assistant-message key."""


EXTRA_FORBIDDEN = ("[{{'type': 'extra_forbidden', 'loc': ('body', '{0}'), 'msg': 'Extra "
                   "inputs are not permitted', 'input': {1}}}]")
"""vLLM's 400 text (pydantic's repr of the error list) for an unknown request key."""


def dialect_of(model: str, table: Mapping[str, Dialect]) -> Dialect:
    """The dialect of the longest prefix of ``model`` in ``table`` (OpenAI's if none)."""
    matches = [prefix for prefix in table if model.startswith(prefix)]
    return table[max(matches, key=len)] if matches else OPENAI
