"""The HTTP requests the codecs build: JSON bodies asking for an event stream, and the
API key from configuration or the environment."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from turnstate.core._errors import ConfigurationError
from turnstate.core._json import JsonObject, compact_json
from turnstate.core._media import DeferredMedia
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
    adapters): a URL ``base_url_problem`` finds nothing wrong with. Anything else failed
    every turn of the provider inside the turn, after its begin (``InvalidUrlClientError``,
    aiohttp's port and credentials refusals).

    Raises:
        ConfigurationError: naming ``base_url`` and the problem; the value only when it
            has no scheme or host and holds no ``@`` (credentials are never printed).
    """
    problem = base_url_problem(url)
    if problem is None:
        return
    if problem == NOT_HTTP:
        shown = "a URL with credentials" if "@" in str(url) else repr(url)
        problem = f"{problem}, got {shown}"
    msg = f"base_url {problem}"
    raise ConfigurationError(msg)


NOT_HTTP = "must be an http or https URL with a host"
CREDENTIALS = "must not carry credentials (user@ or user:password@)"


def base_url_problem(url: object) -> str | None:
    """Why ``url`` cannot be a provider's base URL, in words that never quote it (it may
    hold a password), or None: not an http or https URL with a host (``NOT_HTTP``), a
    port past 65535, 0 or no number (every request would fail), a user or
    password in it (``CREDENTIALS``: aiohttp refuses them beside the ``Authorization``
    header). Shared by the adapters and the server's ``OPENAI_COMPATIBLE_BASE_URL``."""
    if not isinstance(url, str):
        return NOT_HTTP
    try:
        parts = urlsplit(url)
    except ValueError:  # an unbalanced [ or ] in the host
        return "is not a URL (an unbalanced [ or ] around its host)"
    try:
        port = parts.port  # raises for a port past 65535 or not a number
    except ValueError as exc:
        return ("has a port out of range 0-65535" if "out of range" in str(exc)
                else "has a port that is not a number")
    if port == 0:  # connecting to port 0 fails on every request (nothing listens there)
        return "has port 0, where no server listens"
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        return NOT_HTTP
    if parts.username is not None or parts.password is not None:
        return CREDENTIALS
    return None


LOOPBACK_NAMES = frozenset({"localhost", "localhost."})
"""Host names that always mean this machine (RFC 6761; IP literals are read by
``ipaddress``)."""


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (a URL's lower-cased host name) is this machine: a loopback
    name, or an IPv4 or IPv6 loopback address (an IPv4-mapped one too)."""
    if host is None:
        return False
    if host in LOOPBACK_NAMES:
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool((mapped or address).is_loopback)


def check_key_transport(url: str, key: str, *, allow_plain_http: bool) -> None:
    """An API key (or a password in the URL) goes out over TLS, or over plain ``http``
    to this machine only (the emulators, a local server), unless the caller opted in
    with ``allow_plain_http`` (a gateway on a trusted network): over plain ``http`` to
    another host, anyone on the path reads the key off every request.

    Raises:
        ConfigurationError: naming ``base_url``'s host and ``allow_plain_http`` (never
            the key).
    """
    parts = urlsplit(url)
    if allow_plain_http or not (key or parts.password):  # no secret to lose
        return
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        msg = (f"base_url is plain http to {parts.hostname!r}, which would send the API "
               "key in clear: use https, a loopback address, or allow_plain_http=True "
               "for a gateway on a trusted network")
        raise ConfigurationError(msg)


def json_request(
    provider: str, url: str, headers: Mapping[str, str], payload: JsonObject
) -> HttpRequest:
    """A POST of compact JSON that asks for an event stream (lone surrogates in it, which
    UTF-8 cannot encode, replaced by U+FFFD)."""
    return json_text_request(provider, url, headers, compact_json(payload))


def json_text_request(
    provider: str, url: str, headers: Mapping[str, str], text: str,
    media: DeferredMedia | None = None,
) -> HttpRequest:
    """``json_request`` for a payload already written as compact JSON ``text``.

    An adapter whose payload carries inline media writes it with ``compact_json`` in
    the argument of this call, so the payload (its base64 text) is freed before the
    text is encoded, and writes it inside ``deferred_media``: ``media`` then splices
    the base64 into the body's bytes (memory7)."""
    all_headers = {
        "content-type": "application/json",
        "accept": "text/event-stream",
        **headers,
    }
    body = utf8(text) if media is None else media.spliced(utf8(text))
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
