"""The output items a Responses stream builds (moved from ``_parser``, wire8)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from turnstate.core._json import JsonObject
from turnstate.providers._frames import text_of


@attrs.define
class _ItemState:
    """One output item as the stream builds it."""

    item: JsonObject
    done: bool = False
    text: list[str] = attrs.field(factory=list)
    arguments: list[str] = attrs.field(factory=list)
    reasoning: list[str] = attrs.field(factory=list)
    annotations: list[Any] | None = None  # ``output_text.annotation.added``: rare
    refusal: list[str] | None = None  # ``refusal.delta``: rare, kept apart from ``text``

    def assembled(self) -> JsonObject:
        """The item: complete when ``output_item.done`` came, else from the deltas."""
        if self.done:
            return self.item
        kind = self.item.get("type")
        item = dict(self.item)
        if kind == "message":
            content: list[JsonObject] = []
            if self.text or self.refusal is None:
                content.append({"type": "output_text", "text": "".join(self.text)})
                if self.annotations:
                    content[0]["annotations"] = self.annotations
            if self.refusal is not None:  # a refusal block: the answer finishes "refusal"
                content.append({"type": "refusal", "refusal": "".join(self.refusal)})
            item["content"] = content
        elif kind == "function_call":
            item["arguments"] = "".join(self.arguments) or item.get("arguments") or ""
        elif kind == "reasoning" and self.reasoning:
            item["summary"] = [{"type": "summary_text", "text": "".join(self.reasoning)}]
        return item


def _final_position(
    item: JsonObject, index: int, final_items: list[JsonObject],
    by_id: Mapping[Any, int], claimed: set[int],
) -> int | None:
    """Where a streamed item stands in the terminal ``output``: by id, else by index
    when the item there is of the same type and not claimed yet."""
    item_id = text_of(item.get("id"))  # a list or an object is no id
    position = by_id.get(item_id) if item_id else None
    if position is not None and position not in claimed:
        return position
    if 0 <= index < len(final_items) and index not in claimed:
        kind = item.get("type")
        if kind is None or final_items[index].get("type") == kind:
            return index
    return None
