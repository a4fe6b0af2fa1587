"""The package root exports what an embedder needs, documents all of it, leaks nothing."""

from __future__ import annotations

import inspect
import re
import typing
from pathlib import Path

import attrs

import turnstate

API_DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def documented_names() -> set[str]:
    return set(re.findall(r"^- `([A-Za-z_][A-Za-z0-9_]*)`:", API_DOC.read_text(), re.M))


def test_every_exported_name_is_documented_once() -> None:
    text = API_DOC.read_text()
    for name in turnstate.__all__:
        assert len(re.findall(rf"^- `{re.escape(name)}`:", text, re.M)) == 1, name


def test_the_doc_lists_nothing_that_is_not_exported() -> None:
    assert documented_names() == set(turnstate.__all__)


def test_nothing_private_leaks_into_all() -> None:
    leaked = [n for n in turnstate.__all__ if n.startswith("_") and n != "__version__"]
    assert leaked == []
    for name in turnstate.__all__:
        module = getattr(getattr(turnstate, name), "__module__", "turnstate") or ""
        assert module.startswith(("turnstate", "typing", "collections", "types")), name


def test_every_exported_name_exists() -> None:
    assert all(hasattr(turnstate, n) for n in turnstate.__all__)


def test_an_embedder_needs_nothing_else() -> None:
    needed = {"TurnEngine", "TurnInput", "Tool", "ToolSpec", "SqliteStore", "MemoryStore",
              "Store", "AiohttpTransport", "OpenAIResponsesAdapter", "AnthropicAdapter",
              "TurnCompleted", "TurnAborted", "FallbackNotice", "TurnstateError", "ChatBusy"}
    assert needed <= set(turnstate.__all__)


def _turnstate_types(hint: object, out: set[str]) -> set[str]:
    for argument in typing.get_args(hint):
        _turnstate_types(argument, out)
    if isinstance(hint, type) and hint.__module__.startswith("turnstate"):
        out.add(hint.__name__)
    return out


def test_what_the_engines_methods_take_and_return_is_exported() -> None:
    """embed7: ``TurnEngine.stop`` returns a ``TurnRecord`` (its ``status`` a
    ``TurnStatus``) that the root did not export, so an embedder's typed stop handler had
    to import from ``turnstate.storage``, which docs/api.md never names for it."""
    missing: dict[str, set[str]] = {}
    for name, method in inspect.getmembers(turnstate.TurnEngine, inspect.isfunction):
        if name.startswith("_"):
            continue
        named = set()
        for hint in typing.get_type_hints(method).values():
            _turnstate_types(hint, named)
        for kind in list(named):  # and the types of their fields
            cls = getattr(turnstate, kind, None)
            if isinstance(cls, type) and attrs.has(cls):
                for hint in typing.get_type_hints(cls).values():
                    _turnstate_types(hint, named)
        if named - set(turnstate.__all__):
            missing[name] = named - set(turnstate.__all__)
    assert missing == {}
