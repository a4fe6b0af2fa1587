"""The registry's checks, where a value enters it (``_registry``): a provider's mode and
retention, the unknown-model policy, a model's figures, the default context limit.

Each refusal names the field; the attrs validators and converters raise
``ConfigurationError``, ``model_fields_problem`` returns the problem for the registry to
raise. This module imports nothing of ``_registry`` (the registry imports it): the few
things a check needs of it come in as arguments.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import timedelta
from enum import StrEnum
from typing import Any, TypeVar

from turnstate.core._cost import ModelPrice
from turnstate.core._errors import ConfigurationError

_Choice = TypeVar("_Choice", bound=StrEnum)


def member(kind: type[_Choice], value: _Choice | str, what: str) -> _Choice:
    """``value`` as a member of ``kind``; anything else is a ``ConfigurationError``
    naming ``what`` and the choices (it was enum's bare ``ValueError``)."""
    try:
        return kind(value)
    except ValueError:
        msg = f"{what} must be one of {', '.join(kind)}, got {value!r}"
        raise ConfigurationError(msg) from None


def check_retention(_: object, __: object, value: timedelta | None) -> None:
    """None (no cursor) or a positive duration: a negative one expired every cursor at
    once, so every turn replayed."""
    if value is not None and (not isinstance(value, timedelta) or value <= timedelta(0)):
        msg = f"a provider's retention must be a positive timedelta or None, got {value!r}"
        raise ConfigurationError(msg)


_COUNTS = (("context_limit", 1), ("max_output_tokens", 1), ("min_cache_tokens", 0),
           ("min_thinking_budget", 0))
_FLAGS = ("thinking", "compaction", "sampling", "one_sampler", "known")
_INPUTS = frozenset({"image", "file"})
_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high"})
"""``ReasoningEffort``'s values (``_generation`` imports the registry for its types)."""


def _count(value: object, least: int) -> bool:
    return type(value) is int and value >= least


def model_fields_problem(info: Any, replays: Collection[str]) -> str | None:
    """What makes the fields of ``info`` (a ``ModelInfo``, made by the embedder: typed,
    but unchecked) unusable, naming the field, or None; ``replays`` are the
    ``ReasoningReplay`` values."""
    where = f"ModelInfo {info.provider}/{info.name}"
    if not all(isinstance(getattr(info, name), str) for name in ("provider", "name")):
        return f"{where}: provider and name must be strings"
    for name, least in _COUNTS:
        if not _count(getattr(info, name), least):
            return (f"{where}: {name} must be a whole number from {least}, "
                    f"got {getattr(info, name)!r}")
    price: object = info.price
    if not (price is None or isinstance(price, ModelPrice)):
        return f"{where}: price must be a ModelPrice or None, got {type(price).__name__}"
    for name in _FLAGS:
        if type(getattr(info, name)) is not bool:
            return f"{where}: {name} must be True or False, got {getattr(info, name)!r}"
    top = info.max_temperature
    if isinstance(top, bool) or not isinstance(top, int | float) or not 0 <= top <= 2:
        return f"{where}: max_temperature must be a number from 0 to 2, got {top!r}"
    if info.reasoning_replay not in replays:
        return f"{where}: reasoning_replay {info.reasoning_replay!r} is not a ReasoningReplay"
    if not info.inputs <= _INPUTS:
        return f"{where}: inputs must be among {sorted(_INPUTS)}, got {sorted(info.inputs)}"
    if not info.reasoning_efforts <= _EFFORTS:
        return f"{where}: reasoning_efforts {sorted(info.reasoning_efforts)} are not all efforts"
    return None


def check_context_limit(_: object, __: object, value: int) -> None:
    if not _count(value, 1):
        msg = f"the default context limit must be a whole number from 1, got {value!r}"
        raise ConfigurationError(msg)
