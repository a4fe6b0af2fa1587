"""One step of a turn's recorded path through the machine."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class PathStep:
    """``source --trigger--> dest``, with the reason code the trigger carried (if any)."""

    source: str
    trigger: str
    dest: str
    reason: str | None = None
