"""``turnstate serve --cors-origin`` takes an origin as a browser sends it, or it is a
usage error (hunt-api).

The server compares the ``Origin`` header with the option exactly, so
``http://localhost:3000/`` (a trailing slash), ``localhost:3000`` (no scheme), ``*`` or
an upper-case host were taken and CORS then stayed silently off for every request.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_cli_defects import run_in
from turnstate.commands._common import web_origin


@pytest.mark.parametrize("origin", ["http://localhost:3000/", "localhost:3000", "*",
                                    "http://Localhost:3000", "http://x.example/app",
                                    "http://localhost:99999", "null", "ftp://x.example"])
def test_a_value_no_browser_sends_as_its_origin_is_a_usage_error(tmp_path: Path,
                                                                 origin: str) -> None:
    result = run_in(tmp_path, "serve", "--port", "0", "--cors-origin", origin)
    assert result.returncode == 2, result.stderr
    assert "usage: turnstate serve" in result.stderr and "is not an origin" in result.stderr
    assert list(tmp_path.iterdir()) == []  # no tokens file, no database


@pytest.mark.parametrize("origin", ["http://localhost:3000", "https://chat.example",
                                    "http://[::1]:8080", "http://127.0.0.1:5173"])
def test_an_origin_is_taken_as_given(origin: str) -> None:
    assert web_origin(origin) == origin
