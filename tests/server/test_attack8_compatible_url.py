"""``OPENAI_COMPATIBLE_BASE_URL`` that no request can use is refused at start (attack8).

A port past 65535, a port that is no number, or a user and password in the URL were
taken by ``serve --live``: it started, and every turn on ``openai-compatible`` then
aborted ``provider_failed`` (``ValueError: Port out of range 0-65535``, ``Invalid URL:
port can't be converted to integer``, ``Cannot combine AUTHORIZATION header with ...
credentials encoded in URL``). ``live_adapters`` now refuses each with a one-line
``ConfigurationError`` naming the variable, never the URL (it may hold a password).
"""

from __future__ import annotations

import pytest

from turnstate.core._errors import ConfigurationError
from turnstate.server._providers import COMPATIBLE_URL, live_adapters


@pytest.mark.parametrize(("url", "said"), [
    ("http://127.0.0.1:99999/v1", "port out of range"),
    ("https://gateway.example:abc/v1", "port that is not a number"),
    ("https://ann:s3cret@gateway.example/v1", "credentials"),
    ("https://ann@gateway.example/v1", "credentials"),
])
def test_a_base_url_no_request_can_use_is_refused(url: str, said: str) -> None:
    with pytest.raises(ConfigurationError, match=said) as refused:
        live_adapters({COMPATIBLE_URL: url})
    assert COMPATIBLE_URL in str(refused.value) and "s3cret" not in str(refused.value)


def test_a_usable_base_url_still_builds_the_adapter() -> None:
    adapters = live_adapters({COMPATIBLE_URL: "https://gateway.example:8443/v1"})
    assert list(adapters) == ["openai-compatible"]
