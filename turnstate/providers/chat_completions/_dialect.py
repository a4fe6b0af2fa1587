"""Which optional request fields an OpenAI-compatible server takes: given, then learnt.

OpenAI's own API takes ``max_completion_tokens`` (its o-series refuse the older
``max_tokens``: "Unsupported parameter: 'max_tokens' is not supported with this model.
Use 'max_completion_tokens' instead.") and ``stream_options: {"include_usage": true}``
(the usage chunk; providers-wire.md section 3.2 and 3.4). Servers that speak the same
format do not all take them. Some refuse an unknown field: older vLLM (400, pydantic's
``extra_forbidden`` "Extra inputs are not permitted"), Mistral (422, the same error under
``detail``), TGI (422 "unknown field"), Groq ("property '...' is unsupported"), Azure
OpenAI API versions before 2024-09 (400 "Unrecognized request argument supplied"). Others
ignore it: llama.cpp's server and Ollama's ``/v1`` before they learnt the names leave the
limit unset and send no usage chunk.

Two answers, both per adapter's URL:

* a dialect the caller gives (``ChatDialect``; ``ChatCompletionsAdapter(dialect=...)``,
  ``DIALECTS`` by name: ``openai`` (the default) or ``legacy``, ``max_tokens`` and no
  ``stream_options``), for servers that ignore a field silently;
* a refusal learnt: a 400 or 422 whose error names one of ``REFUSABLE`` in refusing words
  (``refused_field``) is ``FieldRefused``, and the adapter sends the same request once more
  without the field (``max_tokens`` for ``max_completion_tokens`` and back; no
  ``stream_options``, no ``prompt_cache_key``), and remembers the refusal for its URL for
  the process (``Refusals``), so later requests are built without it. Each response of such
  a URL names the refused fields in its audit metadata (``REFUSED_KEY``). Without
  ``stream_options`` a server sends no usage, and the turn's audit says ``usageMissing``
  (no cost, never $0).
"""

from __future__ import annotations

import json
import logging
import re

import attrs

from turnstate.core._errors import ConfigurationError, FatalProviderError
from turnstate.core._json import JsonObject, compact_json
from turnstate.core._text import utf8

logger = logging.getLogger("turnstate")

MAX_COMPLETION_TOKENS = "max_completion_tokens"
MAX_TOKENS = "max_tokens"
STREAM_OPTIONS = "stream_options"
PROMPT_CACHE_KEY = "prompt_cache_key"
REFUSABLE = (MAX_COMPLETION_TOKENS, MAX_TOKENS, STREAM_OPTIONS, PROMPT_CACHE_KEY)
"""The optional fields a server may refuse that a request can go without (or renamed)."""
TOKEN_FIELDS = {MAX_COMPLETION_TOKENS: MAX_TOKENS, MAX_TOKENS: MAX_COMPLETION_TOKENS}
"""A refused limit field → the name it is sent under instead."""
REFUSED_KEY = "serverRefusedFields"
"""The audit metadata key naming the fields this URL refused (sorted)."""


@attrs.frozen(kw_only=True)
class ChatDialect:
    """The optional fields one server takes.

    Attributes:
        max_tokens_field: the name ``max_output_tokens`` is sent under
            (``max_completion_tokens`` or ``max_tokens``).
        stream_usage: send ``stream_options: {"include_usage": true}``; off, the server is
            expected to send no usage (the turn's audit then says ``usageMissing``).
    """

    max_tokens_field: str = attrs.field(default=MAX_COMPLETION_TOKENS)
    stream_usage: bool = True

    @max_tokens_field.validator
    def _known_field(self, _: object, value: object) -> None:
        # a ConfigurationError (a ValueError, as attrs' in_ raised), as every setting of
        # the public API outside its range (docs/api.md; embed6)
        if value not in TOKEN_FIELDS:
            msg = (f"ChatDialect.max_tokens_field must be {MAX_COMPLETION_TOKENS!r} or "
                   f"{MAX_TOKENS!r}, got {value!r}")
            raise ConfigurationError(msg)

    def without(self, refused: frozenset[str]) -> ChatDialect:
        """This dialect with the ``refused`` fields renamed or left out."""
        field = self.max_tokens_field
        if field in refused and TOKEN_FIELDS[field] not in refused:
            field = TOKEN_FIELDS[field]
        return ChatDialect(max_tokens_field=field,
                           stream_usage=self.stream_usage and STREAM_OPTIONS not in refused)

    def stream_tail(self) -> str:
        """How the body ends: ``stream``, then ``stream_options`` when sent."""
        if self.stream_usage:
            return ',"stream":true,"stream_options":{"include_usage":true}}'
        return ',"stream":true}'


OPENAI_DIALECT = ChatDialect()
LEGACY_DIALECT = ChatDialect(max_tokens_field=MAX_TOKENS, stream_usage=False)
DIALECTS = {"openai": OPENAI_DIALECT, "legacy": LEGACY_DIALECT}
"""Dialects by name (the server's ``OPENAI_COMPATIBLE_DIALECT``)."""


class FieldRefused(FatalProviderError):
    """A 400/422 refusing an optional request field (``field``, one of ``REFUSABLE``):
    fatal as it is, sent again without the field by the adapter that built it."""

    kind = "field_refused"

    def __init__(self, provider: str, detail: str, *, status: int | None = None,
                 code: str | None = None, field: str) -> None:
        super().__init__(provider, detail, status=status, code=code)
        self.field = field


_REFUSING = re.compile(
    r"unrecogni[sz]ed|unsupported|not supported|does not support|not permitted|"
    r"not allowed|extra[ _](?:inputs?|fields?|forbidden)|unknown (?:field|param|argument|key)|"
    r"unexpected (?:field|param|argument|key)|additional propert", re.IGNORECASE)
"""Words of a refused field, never of a refused value ("max_tokens is too large")."""
_FIELD_NAMES = {field: re.compile(rf"\b{field}\b") for field in REFUSABLE}
REFUSING_CODES = frozenset({"unsupported_parameter", "unknown_parameter", "extra_forbidden"})


def refused_field(status: int, fields: JsonObject) -> str | None:
    """The optional field an error (its parsed ``error`` object, or the whole body when
    it has none: a FastAPI ``detail``) refuses, or None. Its ``param`` first, then the
    first field its text names, when the text refuses (``_REFUSING``) or the code does."""
    if status not in (400, 422):
        return None
    text = compact_json(fields) if len(fields) else ""
    code = fields.get("code")  # any JSON value: only a string names a refusal
    if not (_REFUSING.search(text) or (type(code) is str and code in REFUSING_CODES)):
        return None
    param = fields.get("param")
    if type(param) is str and param in _FIELD_NAMES:
        return param
    named = [(found.start(), field) for field, pattern in _FIELD_NAMES.items()
             if (found := pattern.search(text)) is not None]
    return min(named)[1] if named else None


def amended_body(body: bytes, field: str, refused: frozenset[str]) -> bytes | None:
    """``body`` without ``field`` (a limit field renamed, unless its other name is
    ``refused`` too), or None when the body does not carry it at the top level."""
    payload = json.loads(body)
    if not isinstance(payload, dict) or field not in payload:
        return None
    if field in TOKEN_FIELDS:
        other = TOKEN_FIELDS[field]
        if other in refused:
            return None
        payload = {other if key == field else key: value for key, value in payload.items()}
    else:
        del payload[field]
    return utf8(compact_json(payload))


class Refusals:
    """The fields each URL refused, for the process (one table, shared by adapters)."""

    def __init__(self) -> None:
        self._by_url: dict[str, frozenset[str]] = {}

    def of(self, url: str) -> frozenset[str] | None:
        """What ``url`` refused, None when nothing."""
        return self._by_url.get(url)

    def learn(self, url: str, field: str) -> frozenset[str]:
        """Remember that ``url`` refused ``field`` (logged once); what it refused now."""
        known = self._by_url.get(url, frozenset())
        if field not in known:
            known = self._by_url[url] = known | {field}
            logger.warning("[provider][dialect] %s refused %r: requests to it go without "
                           "it from now on", url, field)
        return known

    def clear(self) -> None:
        self._by_url.clear()


REFUSALS = Refusals()
"""The process's table."""
