"""Moved: the helpers that lived here are in modules named for what they hold
(``_requests``, ``_frames``, ``_errors``, ``_opaque``, ``_envelopes``, ``_tool_calls``).
This module only re-exports them for branches written before the split; import from the
named modules, and delete this file once nothing imports it."""

from turnstate.providers._envelopes import standard_envelope
from turnstate.providers._errors import (
    QUOTA_CODES,
    TOOL_PAIRING_MESSAGES,
    TRANSIENT_STATUSES,
    StreamCodes,
    classify_durable,
    error_fields,
    parse_retry_after,
    quota_code,
    status_error,
)
from turnstate.providers._frames import (
    FrameDispatcher,
    FrameHandler,
    int_field,
    load_frame,
    object_of,
    text_of,
    unhandled_name,
)
from turnstate.providers._opaque import _log_opaque, opaque_part, replayable
from turnstate.providers._requests import json_body_request, json_request, key_or_env
from turnstate.providers._tool_calls import PARALLEL_WRAPPER, unwrap_parallel

__all__ = [
    "PARALLEL_WRAPPER",
    "QUOTA_CODES",
    "TOOL_PAIRING_MESSAGES",
    "TRANSIENT_STATUSES",
    "FrameDispatcher",
    "FrameHandler",
    "StreamCodes",
    "_log_opaque",
    "classify_durable",
    "error_fields",
    "int_field",
    "json_body_request",
    "json_request",
    "key_or_env",
    "load_frame",
    "object_of",
    "opaque_part",
    "parse_retry_after",
    "quota_code",
    "replayable",
    "standard_envelope",
    "status_error",
    "text_of",
    "unhandled_name",
    "unwrap_parallel",
]
