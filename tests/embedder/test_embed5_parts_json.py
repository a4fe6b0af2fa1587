"""A message's parts as JSON for a store of one's own (embed5). docs/api.md's "Write your
own store" names the text a store writes for the cursor, the audit and the context, but a
store on a database also keeps each message's parts, and nothing public wrote or read
them: every such store wrote its own encoder of eight part types (inline bytes
included). ``turnstate.storage.encode_parts`` / ``decode_parts`` are public now, the
encoding the package's own stores use."""

from __future__ import annotations

import json

import pytest

from turnstate import (
    FilePart,
    ImagePart,
    InvalidInput,
    MemoryStore,
    Part,
    ReasoningPart,
    SqliteStore,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    TransitionPart,
)
from turnstate.core import LeanPartRefused, MediaRef
from turnstate.storage import decode_parts, encode_parts

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c63646060f80f0000020101000a2db4"
                    "b40000000049454e44ae426082")


def test_every_part_type_reads_back_equal() -> None:
    parts: tuple[Part, ...] = (
        TextPart(text="hé\u2028"), ImagePart(media_type="image/png", data=PNG, filename="a.png"),
        FilePart(url="https://example.com/a.pdf"), FilePart(data=b"%PDF-1.4 x"),
        ReasoningPart(provider="openai", model="gpt-5", kind="reasoning", text="t",
                      signature="s", data="d"),
        ToolCallPart(call_id="c1", name="f", arguments='{"a": 1}', provider="openai"),
        ToolResultPart(call_id="c1", name="f", output="oops", is_error=True),
        TransitionPart(reason="cursor_expired", strategy="replay", source_state="cursor"))
    text = encode_parts(parts)
    assert isinstance(json.loads(text), list)
    assert decode_parts(text) == parts


def test_a_lean_part_is_refused() -> None:
    ref = MediaRef(kind="image", media_type="image/png", size=1, tokens=1)
    with pytest.raises(LeanPartRefused):
        encode_parts((ref,))  # type: ignore[arg-type]  # what the check is for


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
async def test_a_value_that_is_no_part_is_a_typed_refusal(store_kind: str) -> None:
    """Before: ``KeyError: <class 'str'>`` from the converter's union hook, the one
    error an embedder editing a message (``edit_message(chat, seq, "new text")``) got."""
    with pytest.raises(InvalidInput) as caught:
        encode_parts(("new text",))  # type: ignore[arg-type]  # what the check is for
    assert caught.value.field == "parts" and "str" in caught.value.problem
    store_cm = SqliteStore.open(":memory:") if store_kind == "sqlite" else None
    store = MemoryStore() if store_cm is None else await store_cm.__aenter__()
    try:
        chat = await store.create_chat(owner="o")
        with pytest.raises(InvalidInput):
            await store.edit_message(chat.id, 1, "new text")  # type: ignore[arg-type]
    finally:
        if store_cm is not None:
            await store_cm.__aexit__(None, None, None)
