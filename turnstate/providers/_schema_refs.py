"""Local ``$ref`` inlined, for a provider whose tool parameters take no references.

Gemini's function declarations refuse ``$ref`` and ``$defs`` (400 "Unknown name
\\"$defs\\" ... Cannot find field", or "$ref ... was set alongside unsupported
fields"), and pydantic's ``Model.model_json_schema()`` writes both for any nested model.
``inline_refs`` replaces each ``$ref`` to a place in the same schema (``#/$defs/Name``,
``#/definitions/Name``, any ``#/...`` pointer) by what it points at, keeping the
reference's sibling keywords (a ``description``) over it, and drops the root's
``$defs`` / ``definitions``. A schema without ``$ref`` comes back as it is.

A recursive schema cannot be inlined: ``InvalidInput`` names the tool and the cycle,
as it does a reference that points nowhere, one outside the schema, nesting deeper than
``MAX_REF_DEPTH`` or an inlined schema past ``MAX_INLINED_NODES`` (a chain of shared
definitions can grow exponentially).
"""

from __future__ import annotations

from typing import Any, NoReturn

from turnstate.core._errors import InvalidInput
from turnstate.core._json import JsonObject
from turnstate.core._schema import NOWHERE, ref_target

MAX_REF_DEPTH = 32
"""How many references may be open inside one another."""
MAX_INLINED_NODES = 10_000
"""How many objects and arrays the inlined schema may hold."""
_DEFINITIONS = ("$defs", "definitions")


def _has_ref(node: Any) -> bool:
    if isinstance(node, dict):
        return "$ref" in node or any(_has_ref(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_ref(v) for v in node)
    return False


class _Inliner:
    def __init__(self, root: JsonObject, field: str) -> None:
        self.root, self.field, self.nodes = root, field, 0

    def refuse(self, problem: str) -> NoReturn:
        raise InvalidInput(self.field, problem + " (this provider takes no $ref in tool "
                           "parameters; turnstate inlines local ones)")

    def resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            self.refuse(f"$ref {ref!r} points outside the schema")
        node = ref_target(self.root, ref)
        if node is NOWHERE:
            self.refuse(f"$ref {ref!r} points nowhere in the schema")
        return node

    def walk(self, node: Any, open_refs: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            self.count()
            return [self.walk(v, open_refs) for v in node]
        if not isinstance(node, dict):
            return node
        self.count()
        ref = node.get("$ref")
        if not isinstance(ref, str):
            return {k: self.walk(v, open_refs) for k, v in node.items()}
        if ref in open_refs:
            cycle = " -> ".join((*open_refs[open_refs.index(ref):], ref))
            self.refuse(f"the schema is recursive ({cycle})")
        if len(open_refs) >= MAX_REF_DEPTH:
            self.refuse(f"$ref nesting is deeper than {MAX_REF_DEPTH}")
        target = self.walk(self.resolve(ref), (*open_refs, ref))
        siblings = {k: self.walk(v, open_refs) for k, v in node.items() if k != "$ref"}
        if not isinstance(target, dict):
            self.refuse(f"$ref {ref!r} points at no schema object")
        return {k: v for k, v in target.items() if k not in _DEFINITIONS} | siblings

    def count(self) -> None:
        self.nodes += 1
        if self.nodes > MAX_INLINED_NODES:
            self.refuse(f"the inlined schema holds more than {MAX_INLINED_NODES} "
                              "objects")


def inline_refs(schema: JsonObject, field: str) -> JsonObject:
    """``schema`` with every local ``$ref`` replaced by its target (see the module).

    Raises:
        InvalidInput: ``field`` (``tools[NAME].parameters``) and what cannot be inlined.
    """
    if not _has_ref(schema):
        if any(key in schema for key in _DEFINITIONS):
            return {k: v for k, v in schema.items() if k not in _DEFINITIONS}
        return schema
    inlined = _Inliner(schema, field).walk(
        {k: v for k, v in schema.items() if k not in _DEFINITIONS}, ())
    return dict(inlined)
