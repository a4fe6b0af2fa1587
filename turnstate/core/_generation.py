"""Per-turn generation settings, and the check that a provider and model take them.

``GenerationSettings`` travels with ``TurnInput.settings``. Every field is optional: a
None (or empty) field is not sent, so the adapter's own default applies. Settings are
not part of the continuation envelope: changing them between turns keeps the cursor.

Each provider takes a subset of the fields (``ProviderCapability.settings``) and each
model says what it accepts (``ModelInfo``: output limit, sampling, reasoning efforts,
thinking budget). ``check_settings`` refuses anything else with ``InvalidInput`` naming
the field (``settings.temperature``), before the turn takes its chat's lease.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NoReturn

import attrs

from turnstate.core._capabilities import METADATA_KEYS, PROVIDER_SETTINGS
from turnstate.core._errors import InvalidInput
from turnstate.core._response_format import ResponseFormat, check_response_format, response_format
from turnstate.core._text import first_lone_surrogate

if TYPE_CHECKING:
    from turnstate.core._registry import ModelInfo, ProviderCapability


class ReasoningEffort(StrEnum):
    """How hard a reasoning model thinks, as the providers name it (``none``: no
    reasoning at all, gpt-5.1's default and only OpenAI's from gpt-5.1 on)."""

    NONE = "none"
    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


TOOL_CHOICE_MODES = frozenset({"auto", "none", "required"})
"""``tool_choice`` values besides a tool's name."""

SETTING_FIELDS = ("max_output_tokens", "temperature", "top_p", "reasoning_effort",
                  "reasoning_budget_tokens", "tool_choice", "stop", "parallel_tool_calls",
                  "metadata", "seed", "response_format")
MAX_STOP_SEQUENCES = 4
MAX_STOP_CHARS = 256
"""A stop sequence's most characters: no provider documents one (turnstate's own bound,
far above any marker, so a 100,000-character sequence never reaches a request body)."""
MAX_METADATA_ENTRIES = 16


def _effort(value: ReasoningEffort | str | None) -> ReasoningEffort | None:
    if value is None or isinstance(value, ReasoningEffort):
        return value
    try:
        return ReasoningEffort(value)
    except ValueError:
        choices = ", ".join(e.value for e in ReasoningEffort)
        _refuse("reasoning_effort", f"{value!r} is not one of {choices}")


def _stop(value: Collection[str] | str | None) -> tuple[str, ...]:
    """One sequence, several, or None (not sent, like every field's None)."""
    if value is None or isinstance(value, str):
        return () if value is None else (value,)
    try:
        return tuple(value)
    except TypeError:  # a number: ``tuple``'s bare error
        _refuse("stop", f"must be a string or a sequence of strings, got {type(value).__name__}")


def _metadata(value: Mapping[str, str] | None) -> Mapping[str, str]:
    try:
        return MappingProxyType(dict(value or {}))
    except (TypeError, ValueError):  # not a mapping nor pairs: ``dict``'s bare errors
        _refuse("metadata", f"must be a mapping of strings, got {type(value).__name__}")


@attrs.frozen(kw_only=True)
class GenerationSettings:
    """How the model should generate this turn's answer.

    Attributes:
        max_output_tokens: the most tokens the answer (reasoning included) may take.
        temperature: sampling temperature (0 to 2; Anthropic takes at most 1).
        top_p: nucleus sampling (0 to 1).
        reasoning_effort: ``none`` / ``minimal`` / ``low`` / ``medium`` / ``high`` for
            reasoning models that take an effort (OpenAI, Gemini 3, DeepSeek, Chat
            Completions); ``none`` on gpt-5.1 alone.
        reasoning_budget_tokens: a thinking budget in tokens (Anthropic), below the
            output limit; with it, Anthropic takes no temperature but 1, a top_p from
            0.95 to 1 and a tool_choice of auto or none only.
        tool_choice: ``auto``, ``none``, ``required`` or the name of one of the turn's
            tools, which the model must then call.
        stop: up to four sequences that end the answer, each of 1 to 256 characters.
        parallel_tool_calls: whether the model may call several tools at once.
        metadata: string pairs the provider stores with the request (at most 16).
        seed: a sampling seed, where the provider takes one.
        response_format: the answer as JSON (a ``ResponseFormat``: any JSON object, or
            one matching its schema), or a mapping of its fields.
    """

    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    reasoning_effort: ReasoningEffort | None = attrs.field(default=None, converter=_effort)
    reasoning_budget_tokens: int | None = None
    tool_choice: str | None = None
    stop: tuple[str, ...] = attrs.field(default=(), converter=_stop)
    parallel_tool_calls: bool | None = None
    metadata: Mapping[str, str] = attrs.field(factory=dict, converter=_metadata)
    seed: int | None = None
    response_format: ResponseFormat | None = attrs.field(default=None,
                                                         converter=response_format)

    def given(self) -> tuple[str, ...]:
        """The names of the fields this value sets (not None, not empty)."""
        return tuple(name for name in SETTING_FIELDS if _set(getattr(self, name)))

    def as_json(self) -> dict[str, Any]:
        """The fields set, as JSON (for logs, tests and the server)."""
        out: dict[str, Any] = {}
        for name in self.given():
            value = getattr(self, name)
            out[name] = list(value) if isinstance(value, tuple) else \
                dict(value) if isinstance(value, Mapping) else \
                value.value if isinstance(value, ReasoningEffort) else \
                value.as_json() if isinstance(value, ResponseFormat) else value
        return out


NO_SETTINGS = GenerationSettings()
"""No setting given: the provider's and the model's defaults (``TurnInput``'s default)."""


def after_tool_results(settings: GenerationSettings) -> GenerationSettings:
    """The settings of a turn's requests after its first tool results: a ``tool_choice``
    that forces a call (``required``, or a tool's name) applies to the turn's first
    request only, the later ones leave it to the provider's default (``auto``). Sent
    again, it would make the model call a tool in every answer, so the loop could only
    end at the tool-iteration limit, aborted after paying for every request (as the
    OpenAI Agents SDK's ``reset_tool_choice`` does, embed5). Unforced: ``settings``."""
    choice = settings.tool_choice
    if choice is None or choice in _UNFORCED:
        return settings
    return attrs.evolve(settings, tool_choice=None)


_UNFORCED = frozenset({"auto", "none"})


def _set(value: object) -> bool:
    return value is not None and value != () and not (isinstance(value, Mapping) and not value)


def _refuse(name: str, problem: str) -> NoReturn:
    field = f"settings.{name}"
    raise InvalidInput(field, problem)


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_settings(settings: GenerationSettings, provider: ProviderCapability,
                   model: ModelInfo, tool_names: Collection[str], *,
                   thinking_by_default: bool = False) -> None:
    """Refuse a setting the provider does not take or the model rejects.

    ``thinking_by_default``: the adapter turns extended thinking on for this turn although
    the settings name no budget (``AnthropicAdapter(thinking_budget_tokens=...)``), so the
    thinking rules apply all the same.

    Raises:
        InvalidInput: ``field`` names the setting (``settings.<name>``).
    """
    if settings == NO_SETTINGS:  # nothing set (most turns): nothing to refuse
        return
    for name in settings.given():
        if name not in provider.settings:
            _refuse(name, f"{provider.name} does not take {name}{_instead(name, provider)}")
    try:  # what the model takes: an unknown model's limits are the registry's guess
        _check_limits(settings, model, least=provider.min_output_tokens)
        _check_sampling(settings, model)
        _check_reasoning(settings, model)
    except InvalidInput as exc:
        hint = unknown_model_hint(model)
        if not hint:
            raise
        raise InvalidInput(exc.field, exc.problem + hint) from None
    _check_seed(settings.seed, provider.name)
    _check_tools(settings, tool_names)
    _check_thinking(settings, on=thinking_by_default)
    _check_free_form(settings)
    _check_metadata_keys(settings, provider.name)
    check_response_format(settings.response_format, provider.name)


INSTEAD: Mapping[str, str] = MappingProxyType({
    "reasoning_effort": "reasoning_budget_tokens",
    "reasoning_budget_tokens": "reasoning_effort",
})
"""A setting a provider does not take → the one that asks it the same thing (Anthropic
thinks by a budget in tokens, the others by an effort), named in the refusal."""


def _instead(name: str, provider: ProviderCapability) -> str:
    """What a refusal of ``name`` by ``provider`` adds: the setting it takes instead, or,
    for a provider the embedder added (``Registry.with_provider``), how to say what it
    takes."""
    if provider.name not in PROVIDER_SETTINGS:
        return (f" (a provider added with Registry.with_provider takes the settings its "
                f"settings= names: {', '.join(sorted(provider.settings)) or 'none'})")
    other = INSTEAD.get(name)
    if other is None or other not in provider.settings:
        return ""
    return f": it takes {other} instead"


def unknown_model_hint(model: ModelInfo) -> str:
    """What a refusal by ``model``'s limits adds when the registry does not know the
    model: the limits are its conservative guess (``UNKNOWN_MODEL_LIMITS``), not the
    model's, and ``Registry.with_model`` declares the real ones. Empty for a known one."""
    if model.known:
        return ""
    return (f" ({model.name!r} is not in the registry, which gives an unknown model "
            "conservative limits: declare it with Registry.with_model and pass that "
            "registry to TurnEngine(registry=...))")


def _check_metadata_keys(settings: GenerationSettings, provider: str) -> None:
    """A provider with a fixed ``metadata`` object (``METADATA_KEYS``) takes only its keys."""
    keys = METADATA_KEYS.get(provider)
    if keys is None:
        return
    for key, value in settings.metadata.items():
        if key not in keys:
            _refuse("metadata", f"{provider} takes only {', '.join(sorted(keys))} in "
                    f"metadata, got {key!r}")
        if len(value) > keys[key]:
            _refuse("metadata", f"{provider}'s metadata.{key} takes up to {keys[key]} "
                    f"characters, got {len(value)}")


def _check_limits(settings: GenerationSettings, model: ModelInfo, *, least: int) -> None:
    limit = settings.max_output_tokens
    if limit is not None and (not _integer(limit)
                              or not least <= limit <= model.max_output_tokens):
        _refuse("max_output_tokens", f"must be an integer from {least} to "
                      f"{model.max_output_tokens:,} for {model.name}, got {limit!r}")


SEED_RANGES: Mapping[str, tuple[int, int]] = MappingProxyType({
    "gemini": (-(2**31), 2**31 - 1),
})
"""The ``seed`` a provider takes, where narrower than a signed 64-bit integer (every
other provider's JSON integer): Gemini's ``generation_config.seed`` is an ``int32``
(its SDKs type it ``Integer``), so a larger one failed the turn with a 400 mid-lease."""
INT64 = (-(2**63), 2**63 - 1)


def _check_seed(seed: object, provider: str) -> None:
    if seed is None:
        return
    low, high = SEED_RANGES.get(provider, INT64)
    if not isinstance(seed, int) or isinstance(seed, bool) or not low <= seed <= high:
        _refuse("seed", f"must be an integer from {low:,} to {high:,} for {provider}, "
                f"got {seed!r}")


def _check_sampling(settings: GenerationSettings, model: ModelInfo) -> None:
    for name, top in (("temperature", model.max_temperature), ("top_p", 1.0)):
        value = getattr(settings, name)
        if value is None:
            continue
        if not model.sampling:
            _refuse(name, f"{model.name} is a reasoning model and takes no {name}")
        if not _number(value) or not 0 <= value <= top:
            _refuse(name, f"must be a number from 0 to {top:g}, got {value!r}")
    if model.one_sampler and settings.temperature is not None and settings.top_p is not None:
        _refuse("top_p", f"{model.name} takes temperature or top_p, not both "
                "(the API: \"temperature and top_p cannot both be specified for this model\")")


def _check_reasoning(settings: GenerationSettings, model: ModelInfo) -> None:
    effort = settings.reasoning_effort
    if effort is not None and effort.value not in model.reasoning_efforts:
        known = ", ".join(sorted(model.reasoning_efforts)) or "no effort at all"
        _refuse("reasoning_effort",
                      f"{model.name} takes no effort {effort.value!r} (it takes: {known})")
    budget = settings.reasoning_budget_tokens
    if budget is None:
        return
    if not model.thinking or not model.min_thinking_budget:
        _refuse("reasoning_budget_tokens", f"{model.name} takes no thinking budget")
    ceiling = settings.max_output_tokens or model.max_output_tokens
    if not _integer(budget) or not model.min_thinking_budget <= budget < ceiling:
        _refuse("reasoning_budget_tokens",
                      f"must be at least {model.min_thinking_budget:,} and below the output "
                      f"limit ({ceiling:,}), got {budget!r}")


def _check_tools(settings: GenerationSettings, tool_names: Collection[str]) -> None:
    choice = settings.tool_choice
    if choice is not None and not isinstance(choice, str):  # a list: TypeError below
        _refuse("tool_choice", f"must be a string, got {type(choice).__name__}")
    if choice == "required" and not tool_names:
        _refuse("tool_choice", "required needs at least one tool in the turn")
    if choice is None or choice in TOOL_CHOICE_MODES:
        return
    if choice not in tool_names:
        _refuse("tool_choice", f"{choice!r} is not auto, none, required or one of "
                      f"the turn's tools ({', '.join(sorted(tool_names)) or 'none'})")


THINKING_TOP_P = (0.95, 1.0)
"""The ``top_p`` range Anthropic takes while extended thinking is on."""


def _check_thinking(settings: GenerationSettings, *, on: bool) -> None:
    """Anthropic's rules while extended thinking is on (a turn that sets
    ``reasoning_budget_tokens``, or ``on``: its adapter thinks by default; only models with
    a thinking budget take one). From the
    extended-thinking docs, read 2026-12-03: thinking is not compatible with a changed
    ``temperature`` (1 is the default, so 1 passes) or ``top_k`` (which turnstate never
    sends), ``top_p`` is limited to 0.95-1, and only ``tool_choice`` ``auto`` / ``none``
    work: ``any`` (turnstate's ``required``) and a named tool force tool use, which the API
    refuses ("Thinking may not be enabled when tool_choice forces tool use")."""
    if settings.reasoning_budget_tokens is None and not on:
        return
    if settings.temperature is not None and settings.temperature != 1:
        _refuse("temperature", "extended thinking (reasoning_budget_tokens) takes no "
                f"temperature but 1, got {settings.temperature!r}")
    low, high = THINKING_TOP_P
    if settings.top_p is not None and not low <= settings.top_p <= high:
        _refuse("top_p", f"extended thinking (reasoning_budget_tokens) takes top_p from "
                f"{low:g} to {high:g}, got {settings.top_p!r}")
    choice = settings.tool_choice
    if choice is not None and choice not in ("auto", "none"):
        _refuse("tool_choice", f"{choice!r} forces tool use, which extended thinking "
                "(reasoning_budget_tokens) does not allow: use auto or none")


def _check_free_form(settings: GenerationSettings) -> None:
    if settings.parallel_tool_calls is not None and not isinstance(
            settings.parallel_tool_calls, bool):
        _refuse("parallel_tool_calls", "must be true or false")
    stop = settings.stop
    if len(stop) > MAX_STOP_SEQUENCES or not all(
            _text(s) and 0 < len(s) <= MAX_STOP_CHARS for s in stop):
        _refuse("stop", f"takes up to {MAX_STOP_SEQUENCES} non-empty strings of at most "
                f"{MAX_STOP_CHARS} characters")
    metadata = settings.metadata
    if len(metadata) > MAX_METADATA_ENTRIES or not all(
            _text(k) and _text(v) and 0 < len(k) <= 64 and len(v) <= 512
            for k, v in metadata.items()):
        _refuse("metadata", f"takes up to {MAX_METADATA_ENTRIES} string pairs (keys "
                      "of 1 to 64 characters, values up to 512)")


def _text(value: object) -> bool:
    """A string with a UTF-8 form (a lone surrogate has none: the request could not be
    built, mid-turn)."""
    return isinstance(value, str) and first_lone_surrogate(value) is None
