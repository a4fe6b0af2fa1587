"""The answer as JSON: ``GenerationSettings.response_format`` and the check of it.

A ``ResponseFormat`` without a schema asks for any JSON object (JSON mode), one with a
schema for an answer that matches it (structured output). What each provider takes, from
its API reference (read 2026-12-05): OpenAI Responses ``text.format`` (``json_schema``
with ``name``, ``schema``, ``strict``, or ``json_object``), Chat Completions
``response_format`` (the same two), DeepSeek ``response_format`` ``json_object`` only,
Anthropic ``output_config.format`` (``json_schema`` only: a schema is required), Gemini
Interactions ``response_format`` (``{"type": "text", "mime_type": "application/json",
"schema"?}``). A format a provider cannot honour is refused before the lease, never
dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NoReturn

import attrs

from turnstate.core._errors import InvalidInput
from turnstate.core._json import JsonObject

FIELD = "settings.response_format"
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""OpenAI's rule for a schema's name (``^[a-zA-Z0-9_-]{1,64}$``), kept for every provider
so a format that works on one works on all."""

JSON_OBJECT = "json_object"
JSON_SCHEMA = "json_schema"
KINDS: Mapping[str, frozenset[str]] = MappingProxyType({
    "openai": frozenset({JSON_OBJECT, JSON_SCHEMA}),
    "openai-compatible": frozenset({JSON_OBJECT, JSON_SCHEMA}),
    "gemini": frozenset({JSON_OBJECT, JSON_SCHEMA}),
    "deepseek": frozenset({JSON_OBJECT}),
    "anthropic": frozenset({JSON_SCHEMA}),
})
"""Per provider, the kinds of format its API takes (a provider not listed takes none)."""

ROOT_OBJECT = frozenset({"openai"})
"""Providers whose structured output needs a schema whose root is an object (OpenAI:
"the root level object of a schema must be an object, and not use anyOf")."""


def _refuse(sub: str, problem: str) -> NoReturn:
    """``InvalidInput`` naming ``settings.response_format`` or one of its fields."""
    raise InvalidInput(FIELD + sub, problem) from None


def _mapping(value: object) -> dict[str, Any]:
    """A nested mapping that is not a dict (``MappingProxyType``: a built format's own
    schema, given again by ``attrs.evolve``) as a dict; anything else is not JSON."""
    if isinstance(value, Mapping):
        return dict(value)
    problem = f"Object of type {type(value).__name__} is not JSON serializable"
    raise TypeError(problem)


def _schema(value: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """A private, read-only JSON copy: what the caller changes later is not sent."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        _refuse(".schema", "must be a JSON schema object (a mapping), "
                           f"got {type(value).__name__}")
    try:
        copied = json.loads(json.dumps(value, allow_nan=False, default=_mapping))
    except (TypeError, ValueError) as error:
        _refuse(".schema", f"is not JSON: {error}")
    return MappingProxyType(copied)


def _name(value: str) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        _refuse(".name", "must be 1 to 64 letters, digits, _ or -, "
                           f"got {value!r}")
    return value


def _strict(value: bool) -> bool:
    if not isinstance(value, bool):
        _refuse(".strict", f"must be true or false, got {value!r}")
    return value


@attrs.frozen(kw_only=True)
class ResponseFormat:
    """Ask for the answer as JSON (``GenerationSettings(response_format=...)``).

    Attributes:
        schema: the JSON schema the answer must match (structured output), or None for
            any JSON object (JSON mode). Copied when built.
        name: the schema's name where the wire has one (OpenAI, Chat Completions).
        strict: OpenAI's and Chat Completions' ``strict`` (the schema enforced exactly,
            which needs ``additionalProperties: false`` and every property required);
            Anthropic and Gemini always hold the answer to the schema.
    """

    schema: Mapping[str, Any] | None = attrs.field(default=None, converter=_schema)
    name: str = attrs.field(default="response", converter=_name)
    strict: bool = attrs.field(default=True, converter=_strict)

    @property
    def kind(self) -> str:
        """``json_schema`` with a schema, else ``json_object``."""
        return JSON_OBJECT if self.schema is None else JSON_SCHEMA

    def schema_json(self) -> JsonObject | None:
        """The schema as a plain dict (for a request body), or None."""
        return None if self.schema is None else dict(self.schema)

    def as_json(self) -> JsonObject:
        return {"schema": self.schema_json(), "name": self.name, "strict": self.strict}


def response_format(value: ResponseFormat | Mapping[str, Any] | None) -> ResponseFormat | None:
    """The ``GenerationSettings.response_format`` converter: a ``ResponseFormat``, or a
    mapping of its fields (``ResponseFormat.as_json``: ``schema``, ``name``, ``strict``)."""
    if value is None or isinstance(value, ResponseFormat):
        return value
    if not isinstance(value, Mapping):
        _refuse("", "must be a ResponseFormat or a mapping of its fields, "
                           f"got {type(value).__name__}")
    unknown = sorted(set(value) - {"schema", "name", "strict"})
    if unknown:
        _refuse("", f"takes schema, name and strict, got {unknown[0]!r}")
    return ResponseFormat(**value)


def check_response_format(fmt: ResponseFormat | None, provider: str) -> None:
    """Refuse a format ``provider`` cannot honour (``InvalidInput`` naming it)."""
    if fmt is None:
        return
    kinds = KINDS.get(provider, frozenset())
    if fmt.kind not in kinds:
        need = ("a schema (it has no JSON mode)" if JSON_SCHEMA in kinds else
                "no schema (JSON mode only)" if kinds else "no response format")
        _refuse("" if fmt.schema is None else ".schema",
                           f"{provider} takes {need}")
    if provider in ROOT_OBJECT and fmt.schema is not None and fmt.schema.get("type") != "object":
        _refuse(".schema", f"{provider} takes a schema whose root is "
                           f"\"type\": \"object\", got {fmt.schema.get('type')!r}")


JSON_WORD_PROVIDERS: Mapping[str, bool] = MappingProxyType({
    "openai": False, "openai-compatible": True, "deepseek": True,
})
"""Providers whose JSON mode refuses a request whose messages never say "json" (any
case), with whether the system prompt counts. OpenAI's Chat Completions: 400 "'messages'
must contain the word 'json' in some form, to use 'response_format' of type
'json_object'." (the system message counts); Responses: 400 "Response input messages
must contain the word 'json' in some form to use 'text.format' of type 'json_object'."
(``instructions``, where turnstate sends the system prompt, do not). The OpenAI-compatible
servers take OpenAI's rule. DeepSeek's JSON Output guide: the system or user prompt "must
contain the word json" (its Chinese text; the English says "include"), and a JSON-mode
answer it cannot read as JSON comes back as spaces (docs/decisions.md, wire9)."""


def check_json_word(fmt: ResponseFormat | None, provider: str, system_prompt: str,
                    user_text: str) -> None:
    """Refuse JSON mode on a provider that needs the word "json" in its messages when
    the turn's own message (and, where it counts, the system prompt) never says it:
    the request would be a 400. The turn's message is what every request of the turn
    carries (a cursor request sends it alone), so earlier history is not relied on."""
    if fmt is None or fmt.schema is not None or provider not in JSON_WORD_PROVIDERS:
        return
    texts = [user_text, system_prompt] if JSON_WORD_PROVIDERS[provider] else [user_text]
    if any("json" in text.lower() for text in texts):
        return
    where = "the message or the system prompt" if JSON_WORD_PROVIDERS[provider] \
        else "the message (the system prompt does not count on this wire)"
    _refuse("", f"{provider} JSON mode needs the word \"json\" in {where}: the API "
                "refuses it otherwise")
