"""The error tree: its shape is the one its module docstring draws."""

from __future__ import annotations

import builtins
import importlib
import inspect
import pkgutil
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import turnstate.core
from turnstate.core import _errors
from turnstate.core._errors import (
    ChatBusy,
    ChatNotFound,
    CommitConflict,
    ConfigurationError,
    CursorRejected,
    EnvelopeMalformed,
    FatalProviderError,
    InvalidDefinition,
    MessageNotFound,
    PersistenceRefused,
    ProviderError,
    ProviderProtocolError,
    RateLimited,
    StorageError,
    TransientProviderError,
    TransitionRefused,
    TurnNotFound,
    TurnstateError,
)

_NODE = re.compile(r"^(?P<indent>[ │]*)[├└]── (?P<name>\w+)(?: \((?P<builtin>\w+)\))?")


def documented_tree() -> dict[str, tuple[str, str | None]]:
    """Each class drawn in the module docstring: its parent and its builtin mixin, if any."""
    lines = (_errors.__doc__ or "").splitlines()
    root_line = next(line for line in lines if line.strip() == "TurnstateError")
    root_column = len(root_line) - len(root_line.lstrip())
    parents = ["TurnstateError"]
    tree: dict[str, tuple[str, str | None]] = {}
    for line in lines:
        found = _NODE.match(line[root_column:])
        if not found:
            continue
        depth = len(found["indent"]) // 4 + 1
        del parents[depth:]
        tree[found["name"]] = (parents[depth - 1], found["builtin"])
        parents.append(found["name"])
    return tree


def error_modules() -> list[str]:
    """``turnstate.core._errors`` and the modules it was split into (``_errors_*``)."""
    return sorted(f"turnstate.core.{info.name}"
                  for info in pkgutil.iter_modules(turnstate.core.__path__)
                  if info.name == "_errors" or info.name.startswith("_errors_"))


def defined_errors() -> dict[str, type[BaseException]]:
    """Every error class defined in the ``_errors`` modules."""
    found: dict[str, type[BaseException]] = {}
    for module_name in error_modules():
        module = importlib.import_module(module_name)
        found.update({name: cls for name, cls in inspect.getmembers(module, inspect.isclass)
                      if issubclass(cls, TurnstateError) and cls.__module__ == module_name})
    return found


def test_every_error_imports_from_the_old_path() -> None:
    """The split kept ``turnstate.core._errors`` the one import path of every class."""
    assert len(error_modules()) > 1
    assert set(defined_errors()) == set(_errors.__all__)
    for name, cls in defined_errors().items():
        assert getattr(_errors, name) is cls


def test_docstring_draws_every_error_class() -> None:
    """Every error class in the module is in the drawn tree, and nothing else is."""
    assert set(documented_tree()) | {"TurnstateError"} == set(defined_errors())


@pytest.mark.parametrize("name", sorted(documented_tree()))
def test_each_class_has_the_documented_bases(name: str) -> None:
    """A class's bases are exactly its drawn parent, then its drawn builtin (in that order)."""
    parent, builtin = documented_tree()[name]
    expected = (getattr(_errors, parent),) + ((getattr(builtins, builtin),) if builtin else ())
    assert getattr(_errors, name).__bases__ == expected


def test_key_relations_of_the_tree() -> None:
    """The relations callers rely on, spelled out."""
    assert TurnstateError.__bases__ == (Exception,)
    assert issubclass(EnvelopeMalformed, ValueError)
    assert issubclass(ConfigurationError, ValueError)
    for cls in (ChatNotFound, MessageNotFound, TurnNotFound):
        assert issubclass(cls, StorageError)
        assert issubclass(cls, LookupError)
    assert issubclass(RateLimited, TransientProviderError)
    assert issubclass(ProviderProtocolError, FatalProviderError)
    assert issubclass(CursorRejected, ProviderError)
    assert not issubclass(CursorRejected, TransientProviderError | FatalProviderError)
    assert not issubclass(ChatBusy, LookupError)


def test_every_error_is_exported() -> None:
    """Every error class is public from ``turnstate.core``."""
    assert set(defined_errors()) <= set(turnstate.core.__all__)
    for name, cls in defined_errors().items():
        assert getattr(turnstate.core, name) is cls


def test_structured_fields() -> None:
    """Errors carry what a handler needs as fields, so nobody parses messages."""
    assert EnvelopeMalformed("bad cursor").detail == "bad cursor"
    assert InvalidDefinition(["a", "b"]).problems == ("a", "b")
    refused = TransitionRefused("persist", "tool_calls")
    assert (refused.state, refused.trigger) == ("persist", "tool_calls")
    assert ChatNotFound("c1").chat_id == "c1"
    missing = MessageNotFound("c1", 7)
    assert (missing.chat_id, missing.seq) == ("c1", 7)
    assert TurnNotFound("t1").turn_id == "t1"
    busy = ChatBusy("c1", "t9")
    assert (busy.chat_id, busy.active_turn_id) == ("c1", "t9")
    conflict = CommitConflict("c1", 3, None)
    assert (conflict.chat_id, conflict.expected_version, conflict.actual_version) == (
        "c1", 3, None)
    limited = RateLimited("openai", "slow down", retry_after=2.5)
    assert (limited.status, limited.retry_after, limited.retryable) == (429, 2.5, True)
    rejected = CursorRejected("gemini", "gone", reason="cursor_expired", status=404)
    assert (rejected.reason, rejected.status, rejected.retryable) == ("cursor_expired", 404,
                                                                       False)
    assert PersistenceRefused("no loops").args == ("no loops",)


def test_retryable_follows_the_branch() -> None:
    """Transient errors are retryable; fatal, cursor and plain provider errors are not."""
    assert TransientProviderError("x", "y").retryable is True
    assert RateLimited("x", "y").retryable is True
    for cls in (ProviderError, FatalProviderError, ProviderProtocolError):
        assert cls("x", "y").retryable is False


def test_messages_name_the_problem() -> None:
    """Messages are short and built from the structured fields."""
    assert str(EnvelopeMalformed("bad")) == "malformed continuation envelope: bad"
    assert str(ChatBusy("c1", "t9")) == "chat 'c1' is busy with turn 't9'"
    assert str(InvalidDefinition(["a", "b"])) == "invalid transition table: a; b"
    assert str(CommitConflict("c", 3, 4)) == (
        "chat 'c' changed during the turn: expected version 3, found 4")


@pytest.mark.parametrize(
    ("status", "code", "message"),
    [(400, "invalid_request_error", "openai HTTP 400 [invalid_request_error]: no such item"),
     (500, None, "openai HTTP 500: no such item"),
     (None, "overloaded", "openai stream [overloaded]: no such item"),
     (None, None, "openai stream: no such item"),
     (404, "", "openai HTTP 404: no such item")],
)
def test_provider_error_message_format(status: int | None, code: str | None,
                                       message: str) -> None:
    """``provider HTTP status [code]: detail``, with ``stream`` when there is no status."""
    assert str(ProviderError("openai", "no such item", status=status, code=code)) == message


_provider_errors = st.sampled_from([ProviderError, TransientProviderError, FatalProviderError,
                                    ProviderProtocolError, RateLimited])
_statuses = st.none() | st.integers(100, 599)
_codes = st.none() | st.text(max_size=12)


@given(_provider_errors, st.text(max_size=12), st.text(max_size=40), _statuses, _codes)
def test_provider_error_messages_are_built_from_their_fields_only(
    cls: type[ProviderError], provider: str, detail: str, status: int | None,
    code: str | None,
) -> None:
    """Whatever the fields, the message is exactly provider, status, code and detail: nothing
    else (no request, header or key) can reach it."""
    error = cls(provider, detail, status=status, code=code)
    where = f"HTTP {status}" if status is not None else "stream"
    label = f" [{code}]" if code else ""
    assert str(error) == f"{provider} {where}{label}: {detail}"
    assert (error.provider, error.detail, error.status, error.code) == (provider, detail,
                                                                        status, code)


@given(st.text(max_size=40), _statuses, _codes)
def test_cursor_rejected_message_is_built_from_its_fields_only(
    detail: str, status: int | None, code: str | None
) -> None:
    """The cursor error's message has the same shape; the reason is a field, not text."""
    error = CursorRejected("openai", detail, reason="cursor_invalid", status=status, code=code)
    where = f"HTTP {status}" if status is not None else "stream"
    label = f" [{code}]" if code else ""
    assert str(error) == f"openai {where}{label}: {detail}"
