"""The providers' one scrubber: what it removes and where it applies (issue 12, item 2)."""

from __future__ import annotations

import logging

import pytest

from turnstate.core import ProviderProtocolError
from turnstate.providers._scrub import (
    REDACTED,
    ScrubbingFilter,
    remember_secret,
    scrub_error,
    scrub_text,
)


@pytest.mark.parametrize("text", [
    "Incorrect API key provided: sk-proj-abcdefghijklmnop1234567890.",
    "key sk-ant-api03-AAAAbbbbCCCCdddd-eeee was revoked",
    "API key not valid: AIzaSyA-1234567890abcdefghijklmnopqrstu",
    'headers: {"Authorization": "Bearer whatever-it-looks-like"}',
    "x-api-key: plain-looking-value",
    "X-Goog-Api-Key=another-value-here",
    "sent Bearer abcdefgh12345678 to the server",
])
def test_key_shapes_and_labelled_values_are_removed(text: str) -> None:
    scrubbed = scrub_text(text)
    assert REDACTED in scrubbed
    for secret in ("abcdefghijklmnop", "AAAAbbbb", "AIzaSy", "whatever-it", "plain-looking",
                   "another-value", "abcdefgh1234"):
        assert secret not in scrubbed


def test_ordinary_text_is_left_alone() -> None:
    text = "The model skipped a step: task-level rate limits apply (see docs)."
    assert scrub_text(text) == text


def test_a_remembered_key_of_any_shape_is_removed() -> None:
    remember_secret("zz-unshaped-credential-42")
    assert scrub_text("echo zz-unshaped-credential-42!") == f"echo {REDACTED}!"
    remember_secret("short")  # too short to remember: would garble ordinary text
    assert scrub_text("a short text") == "a short text"


def test_scrub_error_cleans_message_and_detail_and_cuts_the_chain() -> None:
    try:
        try:
            raise ValueError("frame quoted tok-secret-value-123")
        except ValueError as inner:
            raise ProviderProtocolError("openai", "bad tok-secret-value-123") from inner
    except ProviderProtocolError as caught:
        error = scrub_error(caught, ("tok-secret-value-123",))
    assert "tok-secret" not in str(error) and "tok-secret" not in error.detail
    assert error.__cause__ is None and error.__context__ is None


def test_the_log_filter_scrubs_arguments_and_tracebacks() -> None:
    record = logging.LogRecord("turnstate", logging.ERROR, __file__, 1, "failed: %s",
                               ("sk-abcdefghijklmnopqrstuv",), None)
    try:
        raise RuntimeError("Bearer abcdefghijkl")
    except RuntimeError as exc:
        record.exc_info = (type(exc), exc, exc.__traceback__)
    ScrubbingFilter().filter(record)
    text = logging.Formatter().format(record)
    assert "abcdefghijkl" not in text and REDACTED in text


def test_every_logger_of_the_package_is_the_scrubbed_one() -> None:
    """Logger filters do not run for records of child loggers, so every module logs
    through ``turnstate`` itself, the logger the scrubbing filter is installed on."""
    import ast
    from pathlib import Path

    import turnstate

    names = []
    for path in Path(turnstate.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "getLogger":
                names.append((path.name, ast.unparse(node.args[0]) if node.args else ""))
    assert names and all(name == "'turnstate'" for _, name in names), names


@pytest.mark.parametrize(("text", "kept", "gone"), [
    ("connect failed: postgresql://app:s3cr3t-pw@db.internal:5432/prod",
     "postgresql://app:<redacted>@db.internal:5432/prod", "s3cr3t-pw"),
    ("dsn 'host=db user=app password=hunter2xyz dbname=x'", "password=<redacted>",
     "hunter2xyz"),
    ('{"token": "tok_abc123456789", "city": "Oslo"}', '"city": "Oslo"', "tok_abc123456789"),
    ("amqp://guest:guest-pass@mq:5672/ and https://example.com:8080/a?b=c",
     "https://example.com:8080/a?b=c", "guest-pass"),
])
def test_connection_strings_and_labelled_passwords_are_scrubbed(
    text: str, kept: str, gone: str
) -> None:
    """URL credentials and password/secret/token labels (issue 24, item 10: a tool's
    exception text goes through this scrubber)."""
    scrubbed = scrub_text(text)
    assert gone not in scrubbed and kept in scrubbed
