"""A provider that echoes the request's credentials in every error channel it has.

Issue 12, item 2. A random key goes into the adapter; the emulator echoes the request's
auth header values in an HTTP error body, in response headers, in an in-stream error
event, in a garbage frame and in an HTML page sent with status 200. Afterwards the key
is in no event, no log record (message or traceback), no exception string or chain,
and no row or byte of the SQLite file.
"""

from __future__ import annotations

import logging
import string
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from tests.conftest import PROFILE
from tests.engine.support import make_turn
from tests.faults.catalogue import (
    GARBAGE_FRAME,
    HTML_PAGE,
    MODELS,
    PROVIDERS,
    error_body,
    stream_error,
)
from tests.faults.rig import FaultRig, fault_rig, quick_transport
from turnstate.emulators import Fault
from turnstate.emulators._emulated import kind_of
from turnstate.engine import TurnEngine

ECHO = "your key $CREDENTIALS is not valid"
CHANNELS = ("http_body", "http_headers", "stream_error", "garbage_frame", "html_200",
            "rate_limited")
EXAMPLES = {"ci": 300, "deep": 2000}.get(PROFILE, 60)

# A key ends in a tail no schema, column or code constant holds: Hypothesis draws string
# constants of the code (it found "last_provider_st", and capitalised ones later), and a
# key that is a substring of the SQLite file's schema anyway is no leak.
KEY_TAIL = "Xq7Z"
keys = st.builds(lambda prefix, body: prefix + body + KEY_TAIL,
                 st.sampled_from(["", "sk-", "sk-ant-api03-", "sk-proj-", "AIza", "tok_"]),
                 st.text(string.ascii_letters + string.digits + "-_", min_size=16,
                         max_size=48))


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture(scope="module")
def rig() -> Iterator[FaultRig]:
    with fault_rig() as made:
        yield made


def fault_for(provider: str, channel: str) -> Fault:
    if channel == "http_body":
        return Fault(status=400, body=error_body(provider, ECHO), echo_credentials=True)
    if channel == "http_headers":
        return Fault(status=401, body=error_body(provider, "no", "authentication_error"),
                     headers={"WWW-Authenticate": "Bearer $CREDENTIALS",
                              "X-Echo": "$CREDENTIALS"}, echo_credentials=True)
    if channel == "rate_limited":
        return Fault(status=429, body=error_body(provider, ECHO, "rate_limit_error"),
                     headers={"Retry-After": "0", "X-Echo": "$CREDENTIALS"},
                     echo_credentials=True)
    if channel == "stream_error":
        return Fault(frame_after=1, frame=stream_error(provider, ECHO), echo_credentials=True)
    if channel == "garbage_frame":
        return Fault(frame_after=1, frame=GARBAGE_FRAME.replace("MSG", ECHO),
                     echo_credentials=True)
    return Fault(status=200, body=HTML_PAGE.replace("MSG", ECHO), content_type="text/html",
                 echo_credentials=True)


def texts_of(exc: BaseException | None) -> list[str]:
    found: list[str] = []
    while exc is not None:
        found += [str(exc), repr(exc), *map(str, exc.args)]
        exc = exc.__cause__ or exc.__context__
    return found


@settings(max_examples=EXAMPLES, deadline=None)
@given(provider=st.sampled_from(PROVIDERS), channel=st.sampled_from(CHANNELS), key=keys)
def test_an_echoed_key_reaches_nothing(rig: FaultRig, provider: str, channel: str,
                                       key: str) -> None:
    adapter = kind_of(provider).adapter(base_url=rig.stack.base_url(provider), api_key=key)
    captured = Captured()
    logging.getLogger("turnstate").addHandler(captured)
    raised: BaseException | None = None
    events: list[Any] = []
    try:
        rig.stack.emulators[provider].faults.push(fault_for(provider, channel))
        chat = rig.run(rig.store.create_chat(owner="secrets"))

        async def turn() -> None:
            transport = quick_transport()
            engine = TurnEngine(rig.store, {provider: adapter}, transport, clock=rig.clock)
            async with transport:
                async for item in engine.run_turn(chat.id, make_turn(
                        "hi", provider=provider, model=MODELS[provider])):
                    events.append(item)

        try:
            rig.run(turn())
        except Exception as exc:  # searched below like everything else
            raised = exc
    finally:
        logging.getLogger("turnstate").removeHandler(captured)
    final = events[-1] if events else None
    event(f"{channel}: {getattr(final, 'type', 'raised')} {getattr(final, 'reason', '')}")
    assert final is not None and final.type == "turn_aborted", (final, raised)
    haystack = [repr(e) for e in events] + captured.lines + texts_of(raised) + rig.every_row()
    assert not [text for text in haystack if key in text]
    assert key.encode() not in rig.file_bytes()
    assert "<redacted>" in (final.detail or "") or channel in {"http_headers", "html_200"}
