"""Fingerprints of the system prompt and the toolset."""

from __future__ import annotations

import hashlib
import json
import re
from random import Random
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from tests.strategies import json_mutations, key_shuffled, tool_specs
from turnstate.core import _hashing, system_prompt_hash, toolset_hash
from turnstate.core._hashing import EMPTY_TOOLSET_HASH
from turnstate.core._json import canonical_json

WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]},
}
CLOCK = {"name": "now", "description": "", "parameters": {}}
HEX64 = re.compile(r"[0-9a-f]{64}")


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_system_prompt_hash_is_sha256_of_the_prompt_as_canonical_json() -> None:
    """The prompt hash is SHA-256 over the prompt as a JSON string, UTF-8 kept unescaped."""
    assert system_prompt_hash("You are terse.") == sha256_hex('"You are terse."')
    assert system_prompt_hash('Say "hi" ✓\n') == sha256_hex('"Say \\"hi\\" ✓\\n"')
    assert system_prompt_hash("") == sha256_hex('""')


def test_toolset_hash_is_sha256_of_the_canonical_tool_array() -> None:
    """The toolset hash is SHA-256 over the sorted-key, whitespace-free JSON array of the
    tools, ordered by their canonical text."""
    expected_text = (
        '[{"description":"","name":"now","parameters":{}},'
        '{"description":"Current weather for a city.","name":"get_weather",'
        '"parameters":{"properties":{"city":{"type":"string"}},"required":["city"],'
        '"type":"object"}}]'
    )
    assert toolset_hash([WEATHER, CLOCK]) == sha256_hex(expected_text)
    assert toolset_hash([]) == sha256_hex("[]")


def test_hashes_are_lowercase_sha256_hex() -> None:
    """Both digests are 64 lowercase hex characters."""
    assert HEX64.fullmatch(system_prompt_hash("x"))
    assert HEX64.fullmatch(toolset_hash([WEATHER]))


def test_missing_description_and_parameters_are_empty_and_other_keys_ignored() -> None:
    """A tool without description or parameters hashes as ``""`` / ``{}``; extra keys do not
    count."""
    assert toolset_hash([{"name": "now"}]) == toolset_hash([CLOCK])
    assert toolset_hash([{"name": "now", "description": None, "parameters": None}]) == \
        toolset_hash([CLOCK])
    assert toolset_hash([{**WEATHER, "strict": True, "type": "function"}]) == \
        toolset_hash([WEATHER])


@given(st.text(), st.text())
def test_different_prompts_have_different_hashes(first: str, second: str) -> None:
    """Two different prompts never share a digest; equal ones always do."""
    event("equal prompts" if first == second else "different prompts")
    assert (system_prompt_hash(first) == system_prompt_hash(second)) == (first == second)


@given(st.lists(tool_specs, min_size=2, max_size=4), st.randoms(use_true_random=True))
def test_toolset_hash_ignores_tool_order_and_key_order(tools: list[Any], rng: Random) -> None:
    """Permuting the tools, reordering the keys of every object at every depth of every
    schema, or both at once, keeps the digest."""
    expected = toolset_hash(tools)
    permuted = rng.sample(tools, len(tools))
    shuffled = key_shuffled(tools, rng)
    assert shuffled == tools  # same content: only the insertion order differs
    event(f"{len(tools)} tools")
    event("tool order changed" if permuted != tools else "tool order unchanged")
    event("key order changed" if repr(shuffled) != repr(tools) else "key order unchanged")
    assert toolset_hash(permuted) == expected
    assert toolset_hash(shuffled) == expected
    assert toolset_hash(rng.sample(shuffled, len(shuffled))) == expected


_nonempty_toolsets = st.lists(tool_specs, min_size=1, max_size=3)


@st.composite
def changed_toolsets(draw: st.DrawFn) -> tuple[str, list[Any], list[Any]]:
    """A toolset and a copy with one change: a tool's name, description or one detail of its
    schema changed, a tool dropped, or a tool (possibly a duplicate) added."""
    tools = draw(_nonempty_toolsets)
    index = draw(st.integers(0, len(tools) - 1))
    tool = tools[index]
    part = draw(st.sampled_from(("name", "description", "parameters", "drop", "add")))
    if part == "drop":
        return "tool dropped", tools, tools[:index] + tools[index + 1:]
    if part == "add":
        extra = tool if draw(st.booleans()) else draw(tool_specs)
        return "tool added", tools, [*tools, extra]
    if part == "parameters":
        kind, parameters = draw(json_mutations(tool["parameters"]))
        changed = {**tool, "parameters": parameters}
    else:
        kind = "replace text"
        changed = {**tool, part: draw(st.text(max_size=16).filter(lambda t: t != tool[part]))}
    return f"{part}: {kind}", tools, [*tools[:index], changed, *tools[index + 1:]]


@given(changed_toolsets())
def test_toolset_hash_changes_when_any_tool_changes(case: tuple[str, list[Any], list[Any]]) -> None:
    """Changing one tool's name, description or any detail of its schema, or dropping or
    adding a tool (even a duplicate), changes the digest."""
    kind, tools, changed = case
    event(kind)
    assert toolset_hash(changed) != toolset_hash(tools)


def test_canonical_json_builds_no_encoder_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """``json.dumps`` with options builds a ``JSONEncoder`` each call: the canonical text
    comes from one built at import (issue 26), byte for byte the same."""
    built: list[object] = []

    class Counting(json.JSONEncoder):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built.append(self)
            super().__init__(*args, **kwargs)

    values: list[Any] = ["sys\u00e9", [], {"b": [1, 2.5, None], "a": {"z": True, "y": "\u2603"}}]
    expected = [json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                           allow_nan=False) for v in values]
    monkeypatch.setattr(json, "JSONEncoder", Counting)
    assert [canonical_json(v) for v in values] == expected
    assert built == []
    with pytest.raises(ValueError):
        canonical_json([float("nan")])


def test_the_empty_toolset_digest_is_taken_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn without tools gets the digest of ``[]`` computed at import, not per call."""
    assert hashlib.sha256(b"[]").hexdigest() == EMPTY_TOOLSET_HASH

    def refused(value: Any) -> str:
        raise AssertionError(value)

    monkeypatch.setattr(_hashing, "_digest", refused)
    assert toolset_hash([]) == toolset_hash(()) == EMPTY_TOOLSET_HASH
