"""Context pressure: severity bands, token estimates and snapshots."""

from __future__ import annotations

import math

import pytest
from hypothesis import event, given, target
from hypothesis import strategies as st

from tests.strategies import stored_parts
from turnstate.core import (
    CHARS_PER_TOKEN,
    DEFAULT_REGISTRY,
    ContextSettings,
    ContextSnapshot,
    ModelInfo,
    Severity,
    TokenSource,
    context_snapshot,
    estimate_tokens,
    severity_for,
)
from turnstate.core._context import media_chars, part_chars, part_texts
from turnstate.core._conversation import Part, TextPart

ORDERED = [Severity.NORMAL, Severity.INFO, Severity.WARNING, Severity.DANGER,
           Severity.CRITICAL]
BOUNDARIES = [(0.70, Severity.NORMAL, Severity.INFO), (0.85, Severity.INFO, Severity.WARNING),
              (0.92, Severity.WARNING, Severity.DANGER),
              (0.97, Severity.DANGER, Severity.CRITICAL)]


def rank(severity: Severity) -> int:
    return ORDERED.index(severity)


def test_severity_values_are_the_wire_names() -> None:
    """The five severities, in order, with their stable names."""
    assert [s.value for s in Severity] == ["normal", "info", "warning", "danger", "critical"]


@pytest.mark.parametrize(("threshold", "below", "at"), BOUNDARIES,
                         ids=[str(b[0]) for b in BOUNDARIES])
def test_severity_changes_exactly_at_each_threshold(threshold: float, below: Severity,
                                                    at: Severity) -> None:
    """At the threshold the higher band starts; the float just below is still the lower one."""
    assert severity_for(threshold) is at
    assert severity_for(math.nextafter(threshold, 0)) is below


@pytest.mark.parametrize(
    ("ratio", "severity"),
    [(-1.0, Severity.NORMAL), (0.0, Severity.NORMAL), (0.5, Severity.NORMAL),
     (0.8, Severity.INFO), (0.9, Severity.WARNING), (0.95, Severity.DANGER),
     (1.0, Severity.CRITICAL), (3.5, Severity.CRITICAL), (math.inf, Severity.CRITICAL),
     (-math.inf, Severity.NORMAL), (math.nan, Severity.CRITICAL)],
)
def test_severity_inside_the_bands(ratio: float, severity: Severity) -> None:
    """Values inside each band, beyond full, and NaN (critical: unknown is not safe)."""
    assert severity_for(ratio) is severity


_ratios = st.floats(allow_nan=False) | st.sampled_from(
    [t for t, _, _ in BOUNDARIES] + [math.nextafter(t, 0) for t, _, _ in BOUNDARIES])


@given(_ratios, _ratios)
def test_severity_is_monotone(a: float, b: float) -> None:
    """A fuller context never has a lower severity: a <= b implies rank(a) <= rank(b)."""
    low, high = min(a, b), max(a, b)
    # Steer towards pairs straddling a threshold, where a wrong comparison would show.
    closeness = -min(abs(high - t) + abs(low - t) for t, _, _ in BOUNDARIES)
    if math.isfinite(closeness):
        target(closeness, label="closeness of both ratios to one threshold")
    event(f"{severity_for(low)} -> {severity_for(high)}")
    assert rank(severity_for(low)) <= rank(severity_for(high))


@pytest.mark.parametrize(
    ("texts", "tokens"),
    [
        ((), 0),
        (("",), 0),
        (("a",), 1),
        (("abcd",), 1),
        (("abcde",), 2),
        (("x" * 400,), 100),
        (("x" * 401,), 101),
        (("ab", "cd"), 1),  # counted over everything, rounded once
        (("abc", ["de", "fgh"], ("i",)), 3),
        ((["", ""], []), 0),
        (("héllo wörld ✓",), 4),  # characters, not bytes
    ],
)
def test_estimate_tokens(texts: tuple[str | list[str] | tuple[str, ...], ...],
                         tokens: int) -> None:
    """About four characters per token, rounded up, over strings and iterables of strings."""
    assert CHARS_PER_TOKEN == 4
    assert estimate_tokens(*texts) == tokens


def test_estimate_tokens_consumes_generators() -> None:
    """Any iterable of strings counts, generators included."""
    assert estimate_tokens(text for text in ["a" * 5, "b" * 3]) == 2


@given(st.lists(st.text(max_size=50), max_size=8))
def test_estimate_tokens_is_ceiling_of_a_quarter_of_the_characters(texts: list[str]) -> None:
    """The estimate is exactly ceil(total characters / 4), however the texts are grouped."""
    chars = sum(len(t) for t in texts)
    assert estimate_tokens(*texts) == estimate_tokens(texts) == -(-chars // 4)


def test_snapshot_prefers_provider_reported_tokens() -> None:
    """Reported input tokens win; the limit comes from the model registry."""
    snapshot = context_snapshot(provider="openai", model="gpt-4o",
                                reported_input_tokens=96_000, estimated_tokens=10)
    assert snapshot == ContextSnapshot(estimated_input_tokens=96_000, context_limit=128_000,
                                       estimated_usage_ratio=0.75, severity=Severity.INFO,
                                       source=TokenSource.PROVIDER)
    assert snapshot.source.value == "provider"


@pytest.mark.parametrize("reported", [None, 0])
def test_snapshot_falls_back_to_the_estimate(reported: int | None) -> None:
    """Without reported tokens (or with zero, which no real request has) the estimate is used."""
    snapshot = context_snapshot(provider="anthropic", model="claude-sonnet-4-5",
                                reported_input_tokens=reported, estimated_tokens=194_000)
    assert snapshot.source is TokenSource.ESTIMATE
    assert snapshot.source.value == "estimate"
    assert snapshot.estimated_input_tokens == 194_000
    assert snapshot.context_limit == 200_000
    assert snapshot.estimated_usage_ratio == pytest.approx(0.97)
    assert snapshot.severity is Severity.CRITICAL


@pytest.mark.parametrize(
    ("provider", "model", "limit"),
    [("openai", "gpt-4.1", 1_047_576), ("gemini", "gemini-2.5-pro", 1_048_576),
     ("anthropic", "claude-haiku-4-5", 200_000), ("deepseek", "deepseek-chat", 1_000_000),
     ("openai-compatible", "grok-3-mini", 131_072)],
)
def test_snapshot_limit_comes_from_the_model_registry(provider: str, model: str,
                                                      limit: int) -> None:
    """A known model of each of the five providers has its own context limit."""
    snapshot = context_snapshot(provider=provider, model=model, reported_input_tokens=None,
                                estimated_tokens=limit // 2)
    assert snapshot.context_limit == limit
    assert snapshot.estimated_usage_ratio == (limit // 2) / limit
    assert snapshot.severity is Severity.NORMAL


def test_unknown_model_gets_the_registry_default() -> None:
    """An unknown model uses the default limit, which a derived registry can change."""
    default = context_snapshot(provider="openai", model="gpt-9000", reported_input_tokens=64_000,
                               estimated_tokens=0)
    assert default.context_limit == DEFAULT_REGISTRY.default_context_limit == 128_000
    assert default.estimated_usage_ratio == 0.5
    registry = DEFAULT_REGISTRY.with_default_context_limit(64_000)
    small = context_snapshot(provider="openai", model="gpt-9000", reported_input_tokens=64_000,
                             estimated_tokens=0, registry=registry)
    assert small.context_limit == 64_000
    assert small.severity is Severity.CRITICAL
    # The model is unknown to that provider only: a known model keeps its own limit.
    known = context_snapshot(provider="openai", model="gpt-4o", reported_input_tokens=64_000,
                             estimated_tokens=0, registry=registry)
    assert known.context_limit == 128_000


def test_a_registered_model_changes_the_snapshot() -> None:
    """``with_model`` makes a new model's limit count."""
    registry = DEFAULT_REGISTRY.with_model(ModelInfo(provider="deepseek", name="tiny",
                                                     context_limit=1_000))
    snapshot = context_snapshot(provider="deepseek", model="tiny", reported_input_tokens=920,
                                estimated_tokens=0, registry=registry)
    assert (snapshot.context_limit, snapshot.severity) == (1_000, Severity.DANGER)


@given(st.integers(1, 2_000_000), st.integers(0, 3_000_000) | st.none(), st.integers(0, 10**6))
def test_snapshot_is_consistent(limit: int, reported: int | None, estimate: int) -> None:
    """Ratio is tokens over limit and severity is the band of that ratio, for any numbers."""
    registry = DEFAULT_REGISTRY.with_default_context_limit(limit)
    snapshot = context_snapshot(provider="gemini", model="unknown", registry=registry,
                                reported_input_tokens=reported, estimated_tokens=estimate)
    tokens = reported if reported else estimate
    event(str(snapshot.severity))
    assert snapshot.estimated_input_tokens == tokens
    assert snapshot.estimated_usage_ratio == tokens / limit
    assert snapshot.severity is severity_for(tokens / limit)


def test_compaction_settings() -> None:
    """Compaction is on by default at 80% of the limit; an explicit threshold wins."""
    settings = ContextSettings()
    assert settings.provider_compaction_enabled is True
    assert settings.threshold_for(128_000) == 102_400
    assert settings.threshold_for(1_047_576) == 838_060
    assert settings.threshold_for(200_000) == 160_000
    explicit = ContextSettings(compact_threshold=50_000)
    assert explicit.threshold_for(128_000) == 50_000
    assert ContextSettings(provider_compaction_enabled=False).provider_compaction_enabled is False


@given(st.integers(1, 10**12))
def test_default_threshold_is_four_fifths_rounded_down(limit: int) -> None:
    """The default threshold is exactly floor(0.8 * limit), never one token off."""
    assert ContextSettings().threshold_for(limit) == limit * 4 // 5


@given(st.lists(stored_parts(), max_size=5) | st.lists(st.builds(TextPart, text=st.text()),
                                                        max_size=5))
def test_part_chars_counts_the_texts_and_the_media(parts: list[Part]) -> None:
    """Plain text parts are counted without generators; any parts as the texts the model
    sees and the media's characters."""
    assert part_chars(parts) == (sum(len(text) for text in part_texts(parts))
                                 + media_chars(parts))
