"""Frozen attrs records built from all their fields at once, without attrs' ``__init__``.

A cursor turn builds a score of small frozen records (its decision, snapshot, audit,
stats, request, commit, the store's lease and columns). attrs' frozen ``__init__`` binds
its keywords, then sets each slot through a bound ``object.__setattr__`` (a type lookup
per field): several thousand instructions a record (issue 26). ``slot_maker(cls)``
returns a function taking every field ``__init__`` takes, positionally, in the class's
field order, that makes the object with ``object.__new__`` as an unfrozen subclass of
``cls`` adding no slot (``_builder``), sets each slot by a plain attribute store, and
makes it a ``cls``: the same class and slots, so an equal value (each maker in use is
tested against the attrs-built record).

It does what that ``__init__`` does beyond setting slots: a field's converter is applied
to the value given, a field ``__init__`` does not take (``init=False``) gets its plain
default (converted, as ``__init__`` converts it), and the validators run once every slot
is set, unless attrs' validators are disabled. No default is filled in for a field it
takes (every one is passed). ``slot_maker`` refuses, when the module that uses it loads,
a class without slots of its own, with slots besides its fields (attrs' hash cache),
with an ``__init__`` of its own, with ``__attrs_pre_init__`` or ``__attrs_post_init__``,
with an ``attrs.Converter`` (it may take the instance or the field), or with an
``init=False`` field set from a factory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import attrs

T = TypeVar("T")


def slot_maker(cls: type[T]) -> Callable[..., T]:
    """``make(*values)``: ``cls(**dict(zip(names, values)))`` where ``names`` are the
    fields ``__init__`` takes, in order, without attrs' ``__init__``. Its type says
    nothing of its arguments: declare each maker's (``_stats: Callable[[int, ...],
    TurnStats] = slot_maker(TurnStats)``), so that mypy checks every call's order and types.

    Raises:
        TypeError: ``cls`` is a class whose ``__init__`` this cannot stand for.
    """
    fields = attrs.fields(cast(Any, cls))
    problem = _unsupported(cls, fields)
    if problem is not None:
        msg = f"no slot maker for {cls.__qualname__}: {problem}"
        raise TypeError(msg)
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_builder": _builder(cls),
                             "_disabled": attrs.validators.get_disabled}
    names = [f"v{index}" for index, field in enumerate(fields) if field.init]
    lines = [f"def make({', '.join(names)}):", "    value = _new(_builder)"]
    for index, field in enumerate(fields):
        scope[f"_field{index}"] = field
        given = _given(field, index, scope)
        lines.append(f"    value.{field.name} = {given}")
    lines.append("    value.__class__ = _cls")
    checks = [(index, field) for index, field in enumerate(fields) if field.validator]
    if checks:
        lines.append("    if not _disabled():")
        for index, field in checks:
            scope[f"_check{index}"] = field.validator
            lines.append(f"        _check{index}(value, _field{index}, value.{field.name})")
    lines.append("    return value")
    exec(compile("\n".join(lines), f"<slot maker {cls.__qualname__}>", "exec"), scope)
    make: Callable[..., T] = scope["make"]
    return make


def _builder(cls: type) -> type:
    """A subclass of ``cls`` adding no slot, whose attributes are set as a plain object's:
    a maker sets each slot of the new object while it is of this class (an attribute
    store the interpreter specialises for a slot, where the slot descriptor's
    ``__set__`` was a call through a method wrapper per field), then makes it a ``cls``
    (the same layout, so ``__class__`` may change). Both ``__setattr__`` and
    ``__delattr__`` are ``object``'s: the type's one C ``tp_setattro`` is then the
    generic one. The subclass shows in ``cls.__subclasses__()``."""
    namespace = {"__slots__": (), "__setattr__": object.__setattr__,
                 "__delattr__": object.__delattr__, "__module__": cls.__module__,
                 "__qualname__": f"{cls.__qualname__}.<slot maker>"}
    return type(cls)(cls.__name__, (cls,), namespace)


def _given(field: attrs.Attribute[Any], index: int, scope: dict[str, Any]) -> str:
    """The expression of the value ``__init__`` sets field ``index`` to."""
    if not field.init:  # its default, converted as ``__init__`` converts it
        scope[f"_default{index}"] = field.default
        given = f"_default{index}"
    else:
        given = f"v{index}"
    if field.converter is None:
        return given
    scope[f"_convert{index}"] = field.converter
    return f"_convert{index}({given})"


def _unsupported(cls: type, fields: tuple[attrs.Attribute[Any], ...]) -> str | None:
    """Why ``cls``'s ``__init__`` does what a maker does not, or None."""
    if "__slots__" not in cls.__dict__:
        return "it has no slots of its own"
    if hasattr(cls, "__attrs_post_init__") or hasattr(cls, "__attrs_pre_init__"):
        return "it has an __attrs_post_init__ or __attrs_pre_init__"
    if "__attrs_init__" in cls.__dict__:  # attrs made it no __init__: the class has one
        return "it has an __init__ of its own"
    extra = set(cls.__dict__["__slots__"]) - {f.name for f in fields} - {"__weakref__"}
    if extra:  # attrs' hash cache (``cache_hash``): a maker would leave it unset
        return f"it has slots besides its fields: {sorted(extra)}"
    for field in fields:
        if isinstance(field.converter, attrs.Converter):  # it may take the instance
            return f"field {field.name!r} has an attrs.Converter, not a plain function"
        if field.name not in cls.__dict__:
            return f"field {field.name!r} is not a slot of the class's own"
        if not field.init and (field.default is attrs.NOTHING
                               or isinstance(field.default, attrs.Factory)):  # type: ignore[arg-type]
            return f"field {field.name!r} is set by __init__ from a factory or not at all"
    return None
