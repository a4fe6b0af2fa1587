"""``TurnEngine``'s options and ``TurnLimits`` of the wrong type are a
``ConfigurationError`` naming the option when the engine is built (hunt-api).

A dict for ``limits`` or ``registry``, or None for the store, was taken and every turn
then raised a bare ``AttributeError`` from inside the engine; a list of adapters, a
string lease and an unknown ``cache_policy`` raised bare ``TypeError`` / ``ValueError``;
``recover_tool_results="no"`` and ``lease_seconds=True`` were taken (as True and a
one-second lease). ``TurnLimits`` took ``True``, ``1.5`` and ``inf`` as limits and
refused a string or 0 with attrs' bare errors.
"""

from __future__ import annotations

from typing import Any

import pytest

from turnstate.core import ConfigurationError
from turnstate.emulators import ScriptedBackend
from turnstate.engine import TurnEngine, TurnLimits
from turnstate.storage import MemoryStore


@pytest.mark.parametrize(("options", "needle"), [
    ({"limits": {"max_user_text": 5}}, "limits must be a TurnLimits, got dict"),
    ({"registry": {}}, "registry must be a Registry, got dict"),
    ({"store": None}, "store must be a Store, got NoneType"),
    ({"adapters": []}, "adapters must be a Mapping, got list"),
    ({"lease_seconds": "30"}, "lease_seconds must be a number of seconds"),
    ({"lease_seconds": True}, "lease_seconds must be a number of seconds"),
    ({"heartbeat_seconds": "1"}, "heartbeat_seconds must be a number of seconds"),
    ({"recover_tool_results": "no"}, "recover_tool_results must be True or False"),
    ({"cache_policy": "forever"}, "cache_policy 'forever' is not one of"),
])
def test_an_option_of_the_wrong_type_is_refused_naming_it(options: dict[str, Any],
                                                          needle: str) -> None:
    backend = ScriptedBackend()
    given: dict[str, Any] = {"store": MemoryStore(), "adapters": backend.adapters(),
                             "transport": backend, **options}
    with pytest.raises(ConfigurationError, match=needle):
        TurnEngine(given.pop("store"), given.pop("adapters"), given.pop("transport"), **given)


@pytest.mark.parametrize("value", [True, 1.5, float("inf"), "5", 0, -1, None])
@pytest.mark.parametrize("field", ["max_user_text", "max_concurrent_tools", "max_inline_bytes"])
def test_a_limit_that_is_not_a_whole_number_from_1_is_refused(field: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=f"TurnLimits.{field} must be a whole number"):
        TurnLimits(**{field: value})


def test_good_options_are_taken() -> None:
    backend = ScriptedBackend()
    engine = TurnEngine(MemoryStore(), backend.adapters(), backend, lease_seconds=12,
                        heartbeat_seconds=2.5, recover_tool_results=True, cache_policy="off",
                        limits=TurnLimits(max_user_text=1, max_concurrent_tools=2))
    assert engine.lease_seconds == 12 and engine.limits.max_user_text == 1
