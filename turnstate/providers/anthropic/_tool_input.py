"""A tool call's arguments as the ``input`` of Anthropic's ``tool_use`` block (``_blocks``
writes the block): ``tool_input`` reads the stored JSON text as an object (``{}`` when it
is not one or nests too deep), and ``tool_input_json`` writes that object as compact
JSON text, through one C encoder built once and a memo bounded by the characters it holds.
"""

from __future__ import annotations

import json
from json.encoder import c_make_encoder  # type: ignore[attr-defined]

from turnstate.core._json import JsonObject, nested_deeper
from turnstate.providers.chat_completions._codec import quote

_DECODER = json.JSONDecoder()


def tool_input(arguments: str) -> JsonObject:
    """A call's JSON text as the ``input`` object (``{}`` when it is not an object or
    nests deeper than ``MAX_DEPTH``: a model's arguments nested 5,000 deep, stored as
    sent, made every later request of the chat fail to build)."""
    # raw_decode skips json.loads' wrapper (a third of the cost) but refuses leading
    # whitespace and stops after the first value: anything unusual goes the long way.
    try:
        value, end = _DECODER.raw_decode(arguments)
    except (ValueError, RecursionError):
        value, end = None, -1
    if end != len(arguments):
        try:
            value = json.loads(arguments)
        except (ValueError, RecursionError):
            return {}
    return value if isinstance(value, dict) and not nested_deeper(arguments, value) else {}


def _not_json(value: object) -> object:
    msg = f"Object of type {type(value).__name__} is not JSON serializable"
    raise TypeError(msg)


# ``dumps_compact`` as one C encoder built once: ``JSONEncoder.encode`` builds a new one
# per call, which is most of the cost for a call's small input (1.5 -> 0.4 us). Without
# the circular-reference check: its input is freshly decoded JSON, which has no cycles.
_encode_input = c_make_encoder(None, _not_json, quote, None, ":", ",", False, False, False)


class _InputMemo:
    """``tool_input_json``'s memo, bounded by the characters it holds.

    A replay re-renders every earlier call's arguments on each turn, and the
    parse-and-encode is the costliest step of a cold one, so results are kept, but only
    for arguments up to ``MAX_ENTRY_CHARS`` and up to ``MAX_CHARS`` in all (keys and
    values), oldest dropped first: an entry-count bound kept 8,192 entries of any size
    for the life of the process (2,000 calls with 100 KB arguments held 382 MiB).
    """

    MAX_ENTRY_CHARS = 4096
    MAX_CHARS = 4 * 1024 * 1024

    def __init__(self) -> None:
        self._entries: dict[str, str] = {}
        self.chars = 0

    def __call__(self, arguments: str) -> str:
        found = self._entries.get(arguments)
        if found is not None:
            return found
        try:
            encoded = "".join(_encode_input(tool_input(arguments), 0))
            if not encoded.isascii():
                encoded.encode()
        except ValueError:  # NaN, 1e999 or a lone surrogate escape: read, not writable
            encoded = "{}"  # as for arguments that are not a JSON object
        size = len(arguments) + len(encoded)
        if len(arguments) <= self.MAX_ENTRY_CHARS:
            self._entries[arguments] = encoded
            self.chars += size
            while self.chars > self.MAX_CHARS:
                oldest = next(iter(self._entries))
                self.chars -= len(oldest) + len(self._entries.pop(oldest))
        return encoded

    def cache_clear(self) -> None:
        self._entries.clear()
        self.chars = 0


tool_input_json = _InputMemo()
"""``tool_input`` as compact JSON text (exactly what ``dumps_compact`` writes), memoised
within a bound (``_InputMemo``)."""
