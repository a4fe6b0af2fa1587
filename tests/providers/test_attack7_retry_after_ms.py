"""``retry-after-ms``, the OpenAI API's finer ``Retry-After`` (the OpenAI SDKs read it
first), is honoured with the same guards: ASCII delta digits only, never infinite or
negative, and the wait capped by ``RetryPolicy.max_retry_after`` however long it asks.
Before, it was ignored: a 429 saying ``retry-after-ms: 20000`` was retried after the
backoff's half second, spending an attempt the server had said would fail."""

from __future__ import annotations

import pytest

from tests.providers.support import Sleeps
from tests.providers.test_transport import Flaky, collect, error, request_for, serve, transport_with
from turnstate.providers._errors import parse_retry_after
from turnstate.providers._transport import RetryPolicy


@pytest.mark.parametrize(("headers", "seconds"), [
    ({"retry-after-ms": "1500"}, 1.5),
    ({"Retry-After-Ms": " 250.5 "}, 0.2505),
    ({"retry-after-ms": "0"}, 0.0),
    ({"retry-after-ms": "20000", "retry-after": "20"}, 20.0),
    ({"retry-after-ms": "1000000000000"}, 1e9),  # 10^9 s: capped by the policy, below
    ({"retry-after-ms": "-5", "retry-after": "3"}, 3.0),  # not delta digits: the other
    ({"retry-after-ms": "nan", "retry-after": "4"}, 4.0),
    ({"retry-after-ms": "inf"}, None),
    ({"retry-after-ms": "1e999"}, None),
    ({"retry-after-ms": "9" * 400}, None),  # infinite as a float: no hint
    ({"retry-after-ms": "\u0661\u0662"}, None),
])
def test_retry_after_ms_is_read_with_the_same_guards(
        headers: dict[str, str], seconds: float | None) -> None:
    assert parse_retry_after(headers) == seconds


@pytest.mark.parametrize("value", ["1000000000000", "-1", "NaN"])
async def test_a_hostile_retry_after_ms_waits_at_most_the_policy_cap(value: str) -> None:
    handler = Flaky(lambda: error(429, headers={"retry-after-ms": value}))
    sleeps = Sleeps()
    policy = RetryPolicy(max_attempts=2, max_retry_after=30.0, base_delay=0.1, max_delay=1.0)
    async with serve(handler) as server, transport_with(sleeps, retry=policy) as transport:
        await collect(transport, request_for(server))
    assert handler.attempts == 2 and len(sleeps.delays) == 1
    assert 0 <= sleeps.delays[0] <= 30.0


async def test_retry_after_ms_replaces_the_backoff() -> None:
    handler = Flaky(lambda: error(429, headers={"retry-after-ms": "2500"}))
    sleeps = Sleeps()
    async with serve(handler) as server, transport_with(sleeps) as transport:
        await collect(transport, request_for(server))
    assert sleeps.delays == [2.5]
