"""Fingerprints of what the model was told: the system prompt and the toolset.

Both are SHA-256 hex digests of canonical JSON (sorted keys, no whitespace), so they are
stable across processes, Python versions and key orders. A cursor issued under one
prompt or toolset is not reused under another.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from turnstate.core._json import canonical_json


def _digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def system_prompt_hash(text: str) -> str:
    """The digest of a system prompt (the empty prompt has one too).

    The last prompt's digest is kept (one entry: a chat's turns, and most servers' turns,
    send one prompt again and again; a comparison costs less than the digest, and only
    one prompt is held alive)."""
    global _last_prompt  # noqa: PLW0603 - one entry, replaced whole (atomic)
    last = _last_prompt
    if text == last[0]:
        return last[1]
    digest = _digest(text)
    _last_prompt = (text, digest)
    return digest


def canonical_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A tool as the hash sees it: name, description and JSON-schema parameters."""
    return {
        "name": tool.get("name"),
        "description": tool.get("description") or "",
        "parameters": tool.get("parameters") or {},
    }


def toolset_hash(tools: Sequence[Mapping[str, Any]]) -> str:
    """The digest of a toolset, independent of tool order and schema key order.

    Args:
        tools: ``{name, description, parameters}`` mappings, parameters a JSON schema.
            Other keys are not part of the hash; a missing description counts as ``""``
            and missing parameters as ``{}``.
    """
    if not tools:  # most turns: the digest of ``[]``, taken once
        return EMPTY_TOOLSET_HASH
    # The digest is over the canonical JSON array of the canonical tools, ordered by
    # their own canonical text: anyone can recompute it from the tools alone.
    canonical = sorted((canonical_tool(t) for t in tools), key=canonical_json)
    return _digest(canonical)


EMPTY_TOOLSET_HASH = _digest([])
"""``toolset_hash([])``: a turn without tools (issue 26: 8 us a turn, twice, saved)."""


def prompt_cache_key(chat_id: str) -> str:
    """A provider cache-routing key for a chat (OpenAI's ``prompt_cache_key``).

    Stable for the chat across processes (every node routes its requests to the same
    cache) and carrying neither the chat id nor its owner: a SHA-256 digest of the id
    under a fixed label, 32 hex characters, prefixed ``ts-``.
    """
    global _last_cache_key  # noqa: PLW0603 - one entry, replaced whole (atomic)
    last = _last_cache_key
    if chat_id == last[0]:  # the chat's previous call: the key is kept, as the prompt's
        return last[1]
    digest = hashlib.sha256(f"turnstate prompt cache key\0{chat_id}".encode()).hexdigest()
    key = f"ts-{digest[:32]}"
    _last_cache_key = (chat_id, key)
    return key


_last_prompt: tuple[str | None, str] = (None, "")
_last_cache_key: tuple[str | None, str] = (None, "")
"""The last prompt and its digest, the last chat id and its key (none yet)."""
