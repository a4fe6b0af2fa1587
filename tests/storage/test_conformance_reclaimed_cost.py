"""A turn aborted by another node's reclaim counts as a turn of unknown cost, and the turn
that lost its lease may write its bill over that once (moneysmall, 2026-12-05), on every
store."""

from __future__ import annotations

from tests.storage.support import Backend, abort, audit, start
from turnstate.core._conversation import MessageStatus, TextPart, Usage
from turnstate.core._cost import audit_cost_text
from turnstate.server._views import chat_cost, cost_unknown_turns
from turnstate.storage import decode_audit

BILLED = Usage(input_tokens=9_000, output_tokens=400)
BILL = audit(None, metadata={"costUsd": {"total": "0.0265", "input": "0.0225",
                                         "cachedInput": "0", "cacheWrite": "0",
                                         "output": "0.004"}})


async def _window(backend: Backend) -> tuple[int, str | None]:
    shown = (await backend.store.load_messages_lean("c1", limit=50)).messages
    return cost_unknown_turns(shown), chat_cost(shown)


async def _reclaimed_by_begin(backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await store.begin_turn("c1", start("t1", lease_seconds=30, model="gpt-4.1"))
    backend.clock.advance(31)
    await store.begin_turn("c1", start("t2", lease_seconds=30))  # reclaims t1


async def test_a_turn_reclaimed_by_a_begin_is_a_turn_of_unknown_cost(backend: Backend) -> None:
    await _reclaimed_by_begin(backend)
    user, answer = (await backend.store.list_messages("c1"))[:2]
    assert (user.status, answer.status) == (MessageStatus.ABORTED, MessageStatus.ABORTED)
    assert user.provider_state is None and answer.usage is None
    assert answer.provider_state is not None
    record = decode_audit(answer.provider_state)
    assert (record.provider, record.model_name, record.cursor) == ("openai", "gpt-4.1", None)
    assert record.metadata == {"usageMissing": True, "leaseReclaimed": True}
    assert audit_cost_text(answer.provider_state).startswith("unknown (the turn lost its lease")
    assert await _window(backend) == (1, None)


async def test_a_turn_reclaimed_by_the_sweep_is_a_turn_of_unknown_cost(backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await store.begin_turn("c1", start("t1", lease_seconds=30))
    backend.clock.advance(31)
    assert await store.reclaim_expired() == 1
    answer = (await store.list_messages("c1"))[1]
    assert answer.status is MessageStatus.ABORTED and answer.provider_state is not None
    assert decode_audit(answer.provider_state).metadata == {"usageMissing": True,
                                                            "leaseReclaimed": True}
    assert await _window(backend) == (1, None)


async def test_the_turn_that_lost_its_lease_writes_its_bill_once(backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lost = await store.begin_turn("c1", start("t1", lease_seconds=30))
    backend.clock.advance(31)
    await store.begin_turn("c1", start("t2", lease_seconds=30))
    before = (await store.list_messages("c1"))[1]
    await store.abort_turn(lost, abort("lease_lost", usage=BILLED, audit=BILL,
                                       parts=(TextPart(text="late"),)))
    answer = (await store.list_messages("c1"))[1]
    assert answer.usage == BILLED and answer.provider_state is not None
    assert decode_audit(answer.provider_state) == BILL
    assert (answer.status, answer.parts) == (before.status, before.parts)  # nothing else
    turn = await store.load_turn("t1")
    assert (turn.status.value, turn.reason) == ("aborted", "lease_expired")
    assert (await store.load_chat("c1")).active_turn_id == "t2"
    assert await _window(backend) == (0, "0.0265")
    other = audit(None, metadata={"costUsd": {"total": "18"}})
    await store.abort_turn(lost, abort("lease_lost", usage=Usage(input_tokens=1), audit=other))
    again = (await store.list_messages("c1"))[1]
    assert (again.usage, again.provider_state) == (answer.usage, answer.provider_state)


async def test_a_late_abort_that_billed_nothing_keeps_the_unknown_mark(backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lost = await store.begin_turn("c1", start("t1", lease_seconds=30))
    backend.clock.advance(31)
    await store.begin_turn("c1", start("t2", lease_seconds=30))
    marked = (await store.list_messages("c1"))[1].provider_state
    await store.abort_turn(lost, abort("lease_lost"))  # nothing billed: nothing written
    assert (await store.list_messages("c1"))[1].provider_state == marked
    assert await _window(backend) == (1, None)


async def test_an_answer_a_turn_aborted_itself_takes_no_late_bill(backend: Backend) -> None:
    """The late bill needs the reclaim's mark: a turn that wrote its own abort (no bill)
    keeps it as it is, and its user message never gets an audit."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    await store.abort_turn(lease, abort("cancelled"))
    await store.abort_turn(lease, abort("lease_lost", usage=BILLED, audit=BILL))
    user, answer = (await store.list_messages("c1"))[:2]
    assert (user.provider_state, answer.provider_state, answer.usage) == (None, None, None)
    assert await _window(backend) == (0, None)
