"""Chat Completions error bodies (``{"error": {message, type, param, code}}``) → errors."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from turnstate.core._errors import ProviderError
from turnstate.core._json import compact_json
from turnstate.providers._errors import (
    CONTEXT_LENGTH_MESSAGE,
    context_length_error,
    error_fields,
    quota_code,
    status_error,
)
from turnstate.providers._frames import text_of
from turnstate.providers.chat_completions._dialect import FieldRefused, refused_field
from turnstate.providers.chat_completions._stream import stream_error

logger = logging.getLogger("turnstate")

CONTEXT_LENGTH_CODE = "context_length_exceeded"


def classify_chat_error(
    provider: str,
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    bug_markers: Sequence[str],
) -> ProviderError:
    """An OpenAI-shaped error body (``{"error": {message, type, param, code}}``) → error.

    A 400 whose message shows that turnstate built a request the provider's rules
    forbid (tool pairing, missing reasoning) is fatal and logged as a bug. One sent with
    a 2xx status (a gateway's, instead of the stream asked for) is classified by its
    code, as an in-stream error is. A 400 saying the input is longer than the model's
    window (code ``context_length_exceeded``, or OpenAI's and DeepSeek's "maximum context
    length is M tokens" message) is ``ContextLengthExceeded``, with the figures it gives.
    A 400 or 422 refusing an optional field (``_dialect.refused_field``) is
    ``FieldRefused``, which the adapter sends again without the field.
    """
    fields = error_fields(body)
    if 200 <= status < 300:
        return stream_error(provider, fields, status)
    message = fields.get("message")
    detail = text_of(message) or (compact_json(message) if message else f"HTTP {status}")
    raw_code = fields.get("code") if fields.get("code") is not None else fields.get("type")
    code = quota_code(fields) or (str(raw_code) if raw_code is not None else None)
    if status == 400 and (raw_code == CONTEXT_LENGTH_CODE
                          or CONTEXT_LENGTH_MESSAGE.search(detail)):
        return context_length_error(provider, detail, status=status, code=code)
    field = refused_field(status, fields)
    if field is not None:
        return FieldRefused(provider, detail, status=status, code=code, field=field)
    error = status_error(provider, status, headers, detail, code)
    lowered = detail.lower()
    if status == 400 and any(marker in lowered for marker in bug_markers):
        logger.error("[provider][bug] %s rejected a request turnstate built: %s",
                     provider, detail)
    return error
