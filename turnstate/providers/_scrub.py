"""The one scrubber every error text leaving the providers layer goes through.

What it removes, from any text:

* the credentials this process was configured with: every adapter's API key is
  remembered when the adapter is built (``remember_secret``), and the transport adds
  the auth header values of the request at hand;
* the value after any ``Authorization`` / ``x-api-key`` / ``x-goog-api-key`` /
  ``api-key`` label and after ``Bearer``, whatever it looks like;
* anything shaped like a known provider key (OpenAI and Anthropic ``sk-...``, Google
  ``AIza...``, and a few other common prefixes);
* the password of a URL with credentials (``postgresql://user:PASSWORD@host/db``) and
  the value after a ``password`` / ``passwd`` / ``pwd`` / ``secret`` / ``token`` label
  (``password=...`` in a DSN, ``"token": "..."`` in a JSON text).

Where it applies: the transport scrubs the errors it raises (status bodies, connection
failures); ``provider_batches`` scrubs every error of a response's stream, in-stream
error events and malformed frames included, and cuts the exception chain (a codec's
own exception may quote a frame); a filter on the ``turnstate`` logger scrubs every
record (message, arguments and formatted traceback). So events, logs, exception
strings and the store only ever see scrubbed text. A tool's exception text goes
through it too before it becomes the result the model, the store and the event stream
see (``engine._tools``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping

from turnstate.core._errors import ProviderError
from turnstate.core._text import repaired

REDACTED = "<redacted>"

SECRET_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key", "api-key"})
"""Request headers whose values are credentials."""

MIN_SECRET = 8
"""Shorter values are not remembered: replacing them would garble ordinary text."""

_KEY_SHAPES = re.compile(
    r"\b(?:sk-(?:ant-|proj-|svcacct-|admin-|or-v1-)?[A-Za-z0-9_\-]{16,}"
    r"|AIza[0-9A-Za-z_\-]{30,}"
    r"|(?:xai|gsk|pplx|hf)[-_][A-Za-z0-9]{20,})"
)
_LABELLED = re.compile(
    r"(?i)((?:authorization|x-api-key|x-goog-api-key|api-key|api_key|apikey)"
    r"[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token)\s+)?)([^\s\"',;}\]]+)"
)
_BEARER = re.compile(r"(?i)(\b(?:bearer|basic)\s+)([A-Za-z0-9._~+/=\-]{8,})")
_URL_PASSWORD = re.compile(r"(?i)(\b[a-z][a-z0-9+.\-]*://[^\s:/?#@]*:)([^\s/?#@]+)(@)")
_PASSWORD = re.compile(
    r"(?i)(\b(?:password|passwd|pwd|secret|token)[\"']?\s*[:=]\s*[\"']?)([^\s\"'&;,}\]]+)")

MAX_REMEMBERED = 256
"""The most recent configured keys remembered (a server building adapters per user key
must not grow this without bound; key shapes and request headers still apply)."""

_remembered: dict[str, None] = {}


def remember_secret(value: str) -> str:
    """Scrub ``value`` from every later error text and log record; returns it unchanged."""
    secret = value.strip()
    if len(secret) >= MIN_SECRET:
        _remembered.pop(secret, None)
        _remembered[secret] = None
        while len(_remembered) > MAX_REMEMBERED:
            del _remembered[next(iter(_remembered))]
    return value


def secrets_of(headers: Mapping[str, str]) -> tuple[str, ...]:
    """The credential values of a request's headers (and a bearer token on its own)."""
    found: list[str] = []
    for key, value in headers.items():
        if key.lower() not in SECRET_HEADERS or not value.strip():
            continue
        found.append(value)
        scheme, _, token = value.partition(" ")
        if token.strip() and scheme.lower() in {"bearer", "basic", "token"}:
            found.append(token.strip())
    return tuple(found)


def scrub_text(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` without credentials (see the module's docstring for what that covers)."""
    if not text:
        return text
    known = {s for s in (*extra, *_remembered) if len(s) >= MIN_SECRET}
    for secret in sorted(known, key=len, reverse=True):  # a whole value before its part
        if secret in text:
            text = text.replace(secret, REDACTED)
    text = _LABELLED.sub(lambda m: m.group(1) + REDACTED, text)
    text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + REDACTED + m.group(3), text)
    text = _PASSWORD.sub(lambda m: m.group(1) + REDACTED, text)
    return _KEY_SHAPES.sub(REDACTED, text)


MAX_DETAIL = 500
"""The most characters of an error text an event or a stored turn keeps."""


def storable_text(text: str, limit: int = MAX_DETAIL) -> str:
    """``text`` fit for events and every store: scrubbed (``scrub_text``), each lone
    surrogate replaced with U+FFFD (a relay that cut a message inside an emoji leaves
    one, and no store can write it), NUL removed, and bounded to ``limit`` characters."""
    text, _ = repaired(scrub_text(text))
    text = text.replace("\x00", "")
    return text[:limit] + "..." if len(text) > limit else text


MAX_CODE_CHARS = 200
"""The longest provider error code kept (``failure_of`` shows at most as many)."""


def scrub_error(error: ProviderError, extra: Iterable[str] = ()) -> ProviderError:
    """Scrub ``error``'s message, detail and code in place and cut its exception chain.

    The code is the provider's (or a proxy's) words too: the engine sends it as the
    abort's state-change ``reason`` and stores it in the turn's path, so it is scrubbed
    and cut to ``MAX_CODE_CHARS`` like the rest."""
    secrets = tuple(extra)
    error.detail = scrub_text(error.detail, secrets)
    if error.code is not None:
        error.code = scrub_text(error.code, secrets)[:MAX_CODE_CHARS]
    error.args = tuple(scrub_text(a, secrets) if isinstance(a, str) else a
                       for a in error.args)
    error.__cause__ = None
    error.__context__ = None
    error.__suppress_context__ = True
    return error


class ScrubbingFilter(logging.Filter):
    """Scrubs a log record's message, arguments and traceback text (never drops one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = scrub_text(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub_text(record.exc_text)
        return True


def install_log_filter(logger: logging.Logger) -> None:
    """Add one ``ScrubbingFilter`` to ``logger`` (idempotent)."""
    if not any(isinstance(f, ScrubbingFilter) for f in logger.filters):
        logger.addFilter(ScrubbingFilter())


install_log_filter(logging.getLogger("turnstate"))
