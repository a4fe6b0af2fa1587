"""The HTTP requests the codecs build: JSON bodies asking for an event stream, and the
API key from configuration or the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from turnstate.core._errors import ConfigurationError
from turnstate.core._json import JsonObject, compact_json
from turnstate.core._text import utf8
from turnstate.providers._protocol import HttpRequest, http_request
from turnstate.providers._scrub import remember_secret


def key_or_env(api_key: str, variable: str) -> str:
    """The API key given, else the environment's ``variable`` (configuration, read once
    when an adapter is built; never logged, never stored). The key is remembered by the
    scrubber, so no error text or log record can carry it.

    Surrounding whitespace is dropped (a key read from a file keeps its newline, which
    no header may carry: every request failed mid-turn, "Forbidden control character").

    Raises:
        ConfigurationError: the key is not a string, or holds a control character
            inside it (the error names where it came from, never the key).
    """
    key: object = api_key or os.environ.get(variable, "")
    source = "api_key" if api_key else variable
    if not isinstance(key, str):
        msg = f"{source} must be a string, got {type(key).__name__}"
        raise ConfigurationError(msg)
    key = key.strip()
    if not key.isprintable():
        msg = f"{source} holds a control character (a line break?): no header can carry it"
        raise ConfigurationError(msg)
    return remember_secret(key)



def check_base_url(_: object, __: object, url: str) -> None:
    """An adapter's ``base_url`` (an attrs validator, also called as one by the plain
    adapters): an http or https URL with a host. Anything else failed every turn of the
    provider inside the turn, after its begin (``InvalidUrlClientError``).

    Raises:
        ConfigurationError: naming ``base_url`` and the value (unless it holds an ``@``:
            credentials are never printed).
    """
    try:
        parts = urlsplit(url) if isinstance(url, str) else None
    except ValueError:  # an unbalanced [ in the host
        parts = None
    if parts is None or parts.scheme not in {"http", "https"} or not parts.hostname:
        shown = "a URL with credentials" if "@" in str(url) else repr(url)
        msg = f"base_url must be an http or https URL with a host, got {shown}"
        raise ConfigurationError(msg)


def json_request(
    provider: str, url: str, headers: Mapping[str, str], payload: JsonObject
) -> HttpRequest:
    """A POST of compact JSON that asks for an event stream (lone surrogates in it, which
    UTF-8 cannot encode, replaced by U+FFFD)."""
    all_headers = {
        "content-type": "application/json",
        "accept": "text/event-stream",
        **headers,
    }
    body = utf8(compact_json(payload))
    return http_request("POST", url, all_headers, body, provider, None)



def json_body_request(
    provider: str, url: str, headers: Mapping[str, str], body: bytes
) -> HttpRequest:
    """``json_request`` for a body already serialised as compact JSON (UTF-8).

    Codecs that assemble their body from pre-serialised message fragments (replay of a
    long history) use it to skip a second ``json.dumps`` over the whole payload.
    """
    all_headers = {"content-type": "application/json", "accept": "text/event-stream", **headers}
    return http_request("POST", url, all_headers, body, provider, None)
