"""Server-side conversations kept as a chain of nodes (issue 25, defect 14).

A provider that chains requests by id (``previous_response_id``,
``previous_interaction_id``) holds every conversation. The emulators keep each as a
``ChainNode``: the items this step added and a pointer to the node it continues, plus
what a continuation needs without reading the chain (the length, the tool calls still
waiting for an output, the prompt-cache hash of the conversation so far). Continuing a
chain therefore costs the new items, whatever its length, and each stored response holds
only its own items. ``ChainView`` shows a node's whole conversation as a sequence, read
from its end; the scripted model reads only the turn's tail (from the last user item).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import overload

import attrs

from turnstate.emulators._conversation_model import Item
from turnstate.emulators._prompt_cache import Prefix, extend_prefix


@attrs.define(eq=False, kw_only=True)
class ChainNode:
    """One step of a stored conversation.

    ``items`` are this step's own items; when ``replaces_last``, the first of them is the
    parent's last item with this step's text appended (consecutive assistant text joins,
    as ``append_item`` does). ``open_calls`` are the call ids of the conversation's tool
    calls that have no output yet, in conversation order."""

    parent: ChainNode | None
    items: tuple[Item, ...]
    replaces_last: bool = False
    length: int
    open_calls: tuple[str, ...] = ()
    media_from: ChainNode | None = None
    """The latest node of the chain (this one or an ancestor) whose own items carry
    images or files: the model's ``Earlier: ...`` skips every other node."""
    prefix: tuple[str, Prefix] | None = None
    """A cache: the prompt-cache prefix of this conversation after the fixed unit named
    by the first element (computed once per fixed unit, by ``prefix_of``)."""

    @property
    def start(self) -> int:
        """The conversation position of this node's first own item."""
        return self.length - len(self.items)

    def last_item(self) -> Item | None:
        return next(iter(reversed(ChainView(self))), None)

    def find_call(self, call_id: str) -> Item | None:
        """The latest tool call with ``call_id`` in this conversation (walks back only
        past the steps that do not hold it: an output answers one of the latest)."""
        for item in reversed(ChainView(self)):
            if item.kind == "tool_call" and item.call_id == call_id:
                return item
        return None


class ChainView(Sequence[Item]):
    """A node's whole conversation as a read-only sequence, walked from its end: the
    last items cost as many steps as they are from the end, not the chain's length."""

    def __init__(self, node: ChainNode | None) -> None:
        self.node = node

    def __len__(self) -> int:
        return self.node.length if self.node is not None else 0

    def __reversed__(self) -> Iterator[Item]:
        node, skip = self.node, 0
        while node is not None:
            own = node.items
            yield from reversed(own[:len(own) - skip] if skip else own)
            skip = 1 if node.replaces_last else 0
            node = node.parent

    def __iter__(self) -> Iterator[Item]:
        items = list(reversed(self))
        items.reverse()
        return iter(items)

    @overload
    def __getitem__(self, index: int) -> Item: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Item]: ...

    def __getitem__(self, index: int | slice) -> Item | Sequence[Item]:
        size = len(self)
        if isinstance(index, slice):
            start, stop, step = index.indices(size)
            if step != 1:
                return list(self)[index]
            tail = self._tail(size - start)
            return tail[:max(0, stop - start)]
        position = index + size if index < 0 else index
        if not 0 <= position < size:
            msg = "conversation index out of range"
            raise IndexError(msg)
        return self._tail(size - position)[0]

    def user_media_before(self, index: int) -> list[str]:
        """The images and files of the user items before position ``index``, in order,
        read from the nodes that hold any (``ScriptedModel`` echoes them)."""
        found: list[str] = []
        node = self.node.media_from if self.node is not None else None
        while node is not None:
            for offset in range(len(node.items) - 1, -1, -1):
                item = node.items[offset]
                if node.start + offset < index and item.kind == "user":
                    found.extend(reversed(item.media))
            node = node.parent.media_from if node.parent is not None else None
        found.reverse()
        return found

    def _tail(self, count: int) -> list[Item]:
        """The last ``count`` items, in order."""
        out: list[Item] = []
        for item in reversed(self):
            if len(out) >= count:
                break
            out.append(item)
        out.reverse()
        return out


class ChainBuilder:
    """Items appended after ``base`` (None: a new conversation), joined as
    ``append_item`` joins them; ``node()`` makes the step."""

    def __init__(self, base: ChainNode | None) -> None:
        self.base = base
        self.items: list[Item] = []
        self.replaces_last = False
        self._names: dict[str, str] = {}

    def append(self, item: Item) -> None:
        if item.kind == "assistant":
            if self.items and self.items[-1].kind == "assistant":
                self.items[-1] = Item(kind="assistant", text=self.items[-1].text + item.text)
                return
            last = self.base.last_item() if not self.items and self.base else None
            if last is not None and last.kind == "assistant":
                self.items.append(Item(kind="assistant", text=last.text + item.text))
                self.replaces_last = True
                return
        if item.kind == "tool_call":
            self._names[item.call_id] = item.name
        self.items.append(item)

    def name_of(self, call_id: str) -> str:
        """The name of the latest call ``call_id`` so far ('' when there is none)."""
        if call_id in self._names:
            return self._names[call_id]
        call = self.base.find_call(call_id) if self.base is not None else None
        return call.name if call is not None else ""

    def pairing_problem(self) -> str | None:
        """``pairing_problem`` of the whole conversation, reading only the new items
        (the base's calls are all answered but its ``open_calls``)."""
        called: set[str] = set()
        answered: set[str] = set()
        base_open = set(self.base.open_calls) if self.base is not None else set()
        for item in self.items:
            if item.kind == "tool_call":
                called.add(item.call_id)
            elif item.kind == "tool_result":
                known = item.call_id in called or item.call_id in base_open or (
                    self.base is not None and self.base.find_call(item.call_id) is not None)
                if not known:
                    return ("No tool call found for function call output with call_id "
                            f"{item.call_id}.")
                answered.add(item.call_id)
        for call_id in self._open(answered):
            return f"No tool output found for function call {call_id}."
        return None

    def _open(self, answered: set[str]) -> list[str]:
        base = self.base.open_calls if self.base is not None else ()
        own = [i.call_id for i in self.items if i.kind == "tool_call"]
        return [c for c in (*base, *own) if c not in answered]

    def node(self) -> ChainNode:
        answered = {i.call_id for i in self.items if i.kind == "tool_result"}
        base_length = len(ChainView(self.base))
        node = ChainNode(parent=self.base, items=tuple(self.items),
                         replaces_last=self.replaces_last,
                         length=base_length + len(self.items) - int(self.replaces_last),
                         open_calls=tuple(self._open(answered)),
                         media_from=self.base.media_from if self.base is not None else None)
        if any(item.media for item in self.items):
            node.media_from = node
        return node


def chain_of(items: Iterable[Item]) -> ChainNode | None:
    """A one-step chain holding ``items`` (None when there are none)."""
    builder = ChainBuilder(None)
    for item in items:
        builder.append(item)
    return builder.node() if builder.items else None


def prefix_of(node: ChainNode | None, fixed: str, unit: Callable[[Item], str]) -> Prefix:
    """The prompt-cache prefix of ``fixed`` then ``node``'s conversation, one unit per
    item (``unit`` renders it). Cached on each node for the fixed unit it was computed
    with, so a continuation with the same fixed unit hashes only its own items."""
    pending: list[ChainNode] = []
    start: Prefix | None = None
    while node is not None:
        if node.prefix is not None and node.prefix[0] == fixed:
            start = node.prefix[1]
            break
        pending.append(node)
        node = node.parent
    if start is None:
        start = extend_prefix(None, [fixed])
    for step in reversed(pending):
        base = start.previous if step.replaces_last and start.previous is not None else start
        start = extend_prefix(base, [unit(item) for item in step.items])
        step.prefix = (fixed, start)
    return start
