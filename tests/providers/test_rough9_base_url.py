"""An adapter's ``base_url`` that no request can use is refused when the adapter is built
(rough9): a port past 65535 or no number, credentials in the URL (aiohttp refuses them
beside the ``Authorization`` header), a missing host. Attack8 refused these for the
server's ``OPENAI_COMPATIBLE_BASE_URL`` only; an embedder building an adapter got every
turn aborted ``provider_failed`` instead. One check serves both."""

from __future__ import annotations

from typing import Any

import pytest

from turnstate.core._errors import ConfigurationError
from turnstate.providers import ADAPTERS

PASSWORD = "s3cret-pw"


@pytest.mark.parametrize("adapter", ADAPTERS.values(), ids=list(ADAPTERS))
@pytest.mark.parametrize(("url", "said"), [
    ("http://127.0.0.1:99999/v1", "port out of range 0-65535"),
    ("http://127.0.0.1:0/v1", "port 0"),  # no server listens there (lead)
    ("https://gateway.example:00/v1", "port 0"),
    ("https://gateway.example:abc/v1", "port that is not a number"),
    (f"https://ann:{PASSWORD}@gateway.example:abc/v1", "port that is not a number"),
    (f"https://ann:{PASSWORD}@gateway.example/v1", "credentials"),
    ("https://ann@gateway.example/v1", "credentials"),
    (f"https://ann:{PASSWORD}@/v1", "with a host"),
    ("https://:8443/v1", "with a host"),
    (f"https://ann:{PASSWORD}@[::1/v1", "not a URL"),
])
def test_a_base_url_no_request_can_use_is_refused_when_built(adapter: Any, url: str,
                                                            said: str) -> None:
    with pytest.raises(ConfigurationError, match=said) as refused:
        adapter(api_key="k", base_url=url)
    assert str(refused.value).startswith("base_url ")
    assert PASSWORD not in str(refused.value)


@pytest.mark.parametrize("adapter", ADAPTERS.values(), ids=list(ADAPTERS))
def test_a_usable_base_url_with_a_port_builds(adapter: Any) -> None:
    assert adapter(api_key="k", base_url="https://gateway.example:8443/v1")
    assert adapter(api_key="k", base_url="http://[::1]:8080/v1")
