"""A ``Retry-After`` that is not delta-seconds or an HTTP date is no hint.

``float()`` read ``inf``, ``Infinity``, ``1e999`` and 400 nines as an infinite wait
(``nan`` as 0, ``1_0`` as 10, Arabic-Indic digits as digits). The transport capped the
wait, but the aborted turn's ``ProviderFailure.retry_after`` kept the infinity, and
every JSON rendering of the ``turn_aborted`` event (the server's stream, the turn log)
said ``"retryAfter":Infinity``, which ``JSON.parse`` refuses: a browser client never
read the turn's end.
"""

from __future__ import annotations

import json

import pytest

from turnstate.core._errors import RateLimited
from turnstate.core._event_json import plain
from turnstate.engine._outcome import failure_of
from turnstate.providers._errors import parse_retry_after


@pytest.mark.parametrize("value", ["inf", "Infinity", "-inf", "1e999", "9" * 400, "nan",
                                   "1_0", "\u0661\u0662", "1e3", "+5", "0x10", "5 s"])
def test_a_retry_after_that_is_not_seconds_or_a_date_is_none(value: str) -> None:
    assert parse_retry_after({"Retry-After": value}) is None


@pytest.mark.parametrize(("value", "seconds"), [("7", 7.0), (" 12 ", 12.0), ("0", 0.0),
                                                ("0.5", 0.5), ("86400", 86400.0)])
def test_delta_seconds_are_read(value: str, seconds: float) -> None:
    assert parse_retry_after({"retry-after": value}) == seconds


def test_a_past_http_date_is_no_wait() -> None:
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0


def test_the_failure_of_a_hostile_retry_after_renders_as_json() -> None:
    error = RateLimited("openai", "slow down", status=429,
                        retry_after=parse_retry_after({"Retry-After": "1e999"}))
    rendered = plain(failure_of(error))  # as event_json renders a turn_aborted's failure
    json.dumps(rendered, allow_nan=False)
    assert rendered["retryAfter"] is None
