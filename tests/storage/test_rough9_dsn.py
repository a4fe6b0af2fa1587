"""A DSN that cannot be one is ``ConfigurationError`` from the library (rough9): an
unclosed IPv6 bracket made ``split_schema`` (so ``open_store``) raise ``ValueError:
Invalid IPv6 URL``, a port past 65535 made ``PostgresStore.open`` raise
``OverflowError`` from the connection, neither typed, the CLI alone checking first
(attack8). Fuzzed: whatever follows the scheme, only typed errors come out, and none
quotes the password."""

from __future__ import annotations

import os
import socket
from unittest import mock

import pytest
from hypothesis import given, settings

from tests.strategies import DSN_PASSWORD, any_dsns, dsns
from turnstate.core._errors import ConfigurationError, StorageUnavailable
from turnstate.storage import open_store, redact_dsn, split_schema
from turnstate.storage._dsn import check_dsn
from turnstate.storage._postgres import PostgresStore


def _closed_port() -> int:
    with socket.socket() as sock:  # bound, never listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


CLOSED = _closed_port()


@pytest.mark.parametrize("dsn", [
    f"postgresql://ann:{DSN_PASSWORD}@[::1/chats",
    f"postgresql://ann:{DSN_PASSWORD}@127.0.0.1:99999/chats",
    f"postgres://ann:{DSN_PASSWORD}@127.0.0.1:{CLOSED},[::1]:70000/chats",
    f"postgresql://ann:{DSN_PASSWORD}@127.0.0.1:abc/chats",
])
async def test_an_unusable_dsn_is_a_configuration_error(dsn: str) -> None:
    for opening in (open_store(dsn), PostgresStore.open(dsn)):
        with pytest.raises(ConfigurationError) as caught:
            async with opening:
                pass
        assert DSN_PASSWORD not in str(caught.value)
        assert "DSN" in str(caught.value)


@given(any_dsns)
def test_the_dsn_parser_raises_only_typed_errors(dsn: str) -> None:
    assert DSN_PASSWORD not in redact_dsn(dsn) or "%" in dsn  # never raises
    for call in (split_schema, check_dsn):
        try:
            call(dsn)
        except ConfigurationError as exc:
            assert DSN_PASSWORD not in str(exc)


@settings(max_examples=40)
@given(dsns(CLOSED))
async def test_opening_a_mistyped_dsn_raises_only_typed_errors(dsn: str) -> None:
    defaults = {"PGHOST": "127.0.0.1", "PGPORT": str(CLOSED), "PGDATABASE": "rough9_none"}
    with mock.patch.dict(os.environ, defaults):  # a default never reaches a real server
        try:
            async with open_store(dsn, pg_timeouts=(1.0, 1.0)):
                pytest.fail("a closed port opened")
        except (ConfigurationError, StorageUnavailable) as exc:
            assert DSN_PASSWORD not in str(exc)
