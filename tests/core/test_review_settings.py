"""Review of the bughunt's settings checks (issue 26): a ``tool_choice`` that is not a
string is refused naming it, like every other setting of the wrong type."""

from __future__ import annotations

from typing import Any

import pytest

from tests.core.test_settings import refused
from turnstate.core._generation import GenerationSettings


@pytest.mark.parametrize("choice", [["weather"], {"name": "weather"}, 5])
def test_a_tool_choice_that_is_not_a_string_is_refused_naming_it(choice: Any) -> None:
    """A list or a dict (unhashable) raised ``TypeError`` out of ``check_settings``
    (``choice in TOOL_CHOICE_MODES``): a bare internal error from ``start_turn`` where
    every other wrong setting is ``InvalidInput``."""
    problem = refused("openai", "gpt-5", GenerationSettings(tool_choice=choice))
    assert problem.field == "settings.tool_choice"
    assert "string" in problem.problem
