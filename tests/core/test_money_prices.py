"""Money hunt (2026-12-04): list prices that would be wrong are left out."""

from __future__ import annotations

import pytest

from turnstate.core._registry import DEFAULT_REGISTRY


@pytest.mark.parametrize("model", ["deepseek-chat", "deepseek-reasoner", "deepseek-v4-flash",
                                   "deepseek-v4-pro"])
def test_deepseek_models_have_no_list_price(model: str) -> None:
    """deepseek-chat and deepseek-reasoner serve V4 (the registry says so) and DeepSeek
    bills by the hour of the day: no single list price is right, so none is guessed (they
    carried V3.2's, retired in April 2026)."""
    assert DEFAULT_REGISTRY.model("deepseek", model).price is None
