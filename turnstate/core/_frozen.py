"""Frozen attrs records built from all their fields at once, without attrs' ``__init__``.

A cursor turn builds a dozen small frozen records (its decision, snapshot, audit,
stats, the store's lease and columns). attrs' frozen ``__init__`` binds its keywords,
then sets each slot through a bound ``object.__setattr__`` (a type lookup per field):
several thousand instructions a record (issue 26). ``slot_maker(cls)`` returns a
function taking every field's value positionally, in the class's field order, that
makes the object with ``object.__new__`` and sets each slot through its descriptor:
the same class and slots, so an equal value (each maker is tested against the
attrs-built record).

Only for classes whose ``__init__`` does nothing more than set the slots: no converter,
no validator, no ``__attrs_post_init__``. Every field ``__init__`` takes is passed (a
default is not filled in); a field it does not take (``init=False``) gets its plain
default, as ``__init__`` sets it. ``slot_maker`` refuses any other class when the module
that uses it loads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import attrs

T = TypeVar("T")


def slot_maker(cls: type[T]) -> Callable[..., T]:
    """``make(*values)``: ``cls(**dict(zip(names, values)))`` where ``names`` are the
    fields ``__init__`` takes, in order, without attrs' ``__init__``.

    Raises:
        TypeError: ``cls`` is not a slotted attrs class whose ``__init__`` only sets its
            fields.
    """
    fields = attrs.fields(cast(Any, cls))
    problem = _unsupported(cls, fields)
    if problem is not None:
        msg = f"no slot maker for {cls.__qualname__}: {problem}"
        raise TypeError(msg)
    given = [field for field in fields if field.init]
    names = [f"v{index}" for index in range(len(given))]
    values = {field.name: name for field, name in zip(given, names, strict=True)}
    lines = [f"def make({', '.join(names)}):", "    value = _new(_cls)"]
    lines += [f"    _set{index}(value, {values.get(field.name, f'_default{index}')})"
              for index, field in enumerate(fields)]
    lines.append("    return value")
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    for index, field in enumerate(fields):
        scope[f"_set{index}"] = cls.__dict__[field.name].__set__
        scope[f"_default{index}"] = field.default
    exec(compile("\n".join(lines), f"<slot maker {cls.__qualname__}>", "exec"), scope)
    make: Callable[..., T] = scope["make"]
    return make


def _unsupported(cls: type, fields: tuple[attrs.Attribute[Any], ...]) -> str | None:
    """Why ``cls``'s ``__init__`` does more than set its slots, or None."""
    if "__slots__" not in cls.__dict__:
        return "it has no slots of its own"
    if hasattr(cls, "__attrs_post_init__") or hasattr(cls, "__attrs_pre_init__"):
        return "it has an __attrs_post_init__ or __attrs_pre_init__"
    for field in fields:
        if field.converter is not None or field.validator is not None:
            return f"field {field.name!r} has a converter or a validator"
        if field.name not in cls.__dict__:
            return f"field {field.name!r} is not a slot of the class's own"
        if not field.init and (field.default is attrs.NOTHING
                               or isinstance(field.default, attrs.Factory)):  # type: ignore[arg-type]
            return f"field {field.name!r} is set by __init__ from a factory or not at all"
    return None
