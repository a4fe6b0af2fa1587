"""Conformance, citations (wire6): an answer's citations are stored with its text part and
read back equal on every backend, whole and lean; a text part without any is stored as
it always was."""

from __future__ import annotations

from tests.storage.support import Backend, commit, start
from turnstate.core._citations import Citation
from turnstate.core._conversation import ReasoningPart, TextPart

CITED = (Citation(kind="url_citation", url="https://example.com/a", title="A", start=0, end=5),
         Citation(kind="char_location", cited_text="Blå", source_id="0", source_start=3,
                  source_end=6),
         Citation(kind="a_future_kind"))
ANSWER = (ReasoningPart(provider="anthropic", model="m", kind="thinking", text="t",
                        signature="s"),
          TextPart(text="Hello world", citations=CITED),
          TextPart(text="no sources"),
          TextPart(text="phased", phase="final_answer", citations=CITED[:1]))


async def test_every_backend_keeps_an_answers_citations(backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    await store.commit_turn(lease, commit("resp_1", parts=ANSWER))
    _, answer = await store.list_messages("c1")
    assert answer.parts == ANSWER
    lean = await store.list_messages_lean("c1")
    assert lean[1].parts == ANSWER
