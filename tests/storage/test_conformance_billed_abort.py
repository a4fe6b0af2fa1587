"""An aborted turn keeps what its requests billed (money hunt, 2026-12-04), on every store."""

from __future__ import annotations

from tests.storage.support import Backend, abort, audit, committed_turn, start
from turnstate.core._conversation import MessageStatus, Usage
from turnstate.storage import decode_audit

BILLED = Usage(input_tokens=9_000, output_tokens=400, cached_input_tokens=6_000)


async def test_an_abort_stores_the_usage_and_audit_its_requests_billed(
    backend: Backend,
) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    record = audit(None, metadata={"costUsd": {"total": "0.0123"}})
    await store.abort_turn(lease, abort("tool_iteration_limit", usage=BILLED, audit=record))
    assistant = (await store.list_messages("c1"))[1]
    assert assistant.status is MessageStatus.ABORTED
    assert assistant.usage == BILLED
    assert assistant.provider_state is not None
    assert decode_audit(assistant.provider_state) == record


async def test_an_abort_that_billed_nothing_writes_no_usage(backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    await store.abort_turn(lease, abort("cancelled"))
    assistant = (await store.list_messages("c1"))[1]
    assert (assistant.usage, assistant.provider_state) == (None, None)


async def test_a_late_abort_never_rewrites_a_reclaimed_turns_answer(backend: Backend) -> None:
    """Only what is still the turn's: once its messages are no longer in progress (the
    turn was aborted already), a second abort writes no usage over them."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    await store.abort_turn(lease, abort("cancelled"))
    await store.abort_turn(lease, abort("tool_iteration_limit", usage=BILLED,
                                        audit=audit(None)))
    assistant = (await store.list_messages("c1"))[1]
    assert (assistant.usage, assistant.provider_state) == (None, None)
    await committed_turn(store, "c1", "t2")
