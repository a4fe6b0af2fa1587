"""An Anthropic request above the standard 200,000-token window has no price (money9):
such a request runs in a long-context window billed at premium rates no source read
here gives as Anthropic's own; it was priced at the standard rates (half or less of the
premium figures third-party tables quote), an understated bill."""

from __future__ import annotations

import json

import pytest

from turnstate.core import ConfigurationError
from turnstate.core._bill import cost_unknown_turns
from turnstate.core._conversation import Usage
from turnstate.core._cost import ModelPrice, audit_cost_text, turn_cost
from turnstate.core._prices import ANTHROPIC_STANDARD_CONTEXT_TOKENS, PRICES


@pytest.mark.parametrize("key", [k for k in PRICES if k[0] == "anthropic"])
def test_an_anthropic_request_above_the_standard_window_has_no_price(
    key: tuple[str, str],
) -> None:
    price = PRICES[key]
    at_limit = Usage(input_tokens=ANTHROPIC_STANDARD_CONTEXT_TOKENS, output_tokens=10,
                     cached_input_tokens=150_000)
    above = Usage(input_tokens=ANTHROPIC_STANDARD_CONTEXT_TOKENS + 1, output_tokens=10,
                  cached_input_tokens=150_000)
    assert turn_cost(at_limit, price) is not None
    assert turn_cost(above, price) is None


def test_other_providers_prices_are_not_capped() -> None:
    usage = Usage(input_tokens=900_000, output_tokens=10)
    assert turn_cost(usage, PRICES["openai", "gpt-4.1"]) is not None
    assert turn_cost(usage, PRICES["gemini", "gemini-2.5-pro"]) is not None


@pytest.mark.parametrize("tokens", [0, -5, 1.5, True])
def test_unpriced_above_is_a_whole_number_of_tokens(tokens: object) -> None:
    with pytest.raises(ConfigurationError):
        ModelPrice(input="1", cached_input="0.1", output="2",
                   unpriced_above=tokens)  # type: ignore[arg-type]


class _Stored:
    role = "assistant"

    def __init__(self, metadata: dict[str, object]) -> None:
        self.provider_state = json.dumps({"metadata": metadata})


def test_a_turn_with_an_unpriced_request_is_counted_as_unknown_and_worded_so() -> None:
    stored = _Stored({"unpricedRequests": 1, "sent": {"requests": 1}})
    assert cost_unknown_turns([stored]) == 1
    assert "1 request(s) billed at rates not listed here" in audit_cost_text(
        stored.provider_state)
