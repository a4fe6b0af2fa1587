"""The root of turnstate's error tree, ``TurnstateError`` (the tree is drawn in
``turnstate.core._errors``, which re-exports every class)."""

from __future__ import annotations

import re
from typing import Any, ClassVar


class TurnstateError(Exception):
    """Base class of every error turnstate raises on purpose.

    ``error_code``: the class's stable code, its name in snake_case (``ChatBusy``:
    ``chat_busy``), set for every subclass as it is defined."""

    error_code: ClassVar[str] = "turnstate_error"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "error_code" not in cls.__dict__:
            cls.error_code = _snake(cls.__name__.lstrip("_"))


def _snake(name: str) -> str:
    """``ChatBusy`` -> ``chat_busy``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
