"""A stopped turn keeps its streamed text when its abort meets the store away (life12).

``record_abort`` wrote the abort again without the turn's parts after ANY failed write,
so a database away for a moment (a ``StorageUnavailable``, the reply lost) dropped the
text the turn had streamed: the stopped answer was stored empty. Only a refusal of the
write (any other error: the store would not take those parts) drops them now; a
transient failure is retried with the parts.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.engine.support import Env, broken, make_turn
from turnstate.core import TextPart
from turnstate.core._errors import PersistenceRefused, StorageError, StorageUnavailable
from turnstate.emulators._scripted import ScriptStep
from turnstate.storage import TurnStatus


async def _stopped_mid_answer(env: Env, error: StorageError, failures: int) -> tuple[str, Any]:
    """A turn stopped after its first text delta, its first ``failures`` abort writes
    failing with ``error``; the text streamed and the stored answer."""
    abort, failed = env.store.abort_turn, []

    async def flaky(*args: Any, **kwargs: Any) -> Any:
        if len(failed) < failures:
            failed.append(args[1].parts)
            raise error
        return await abort(*args, **kwargs)

    gate = asyncio.Event()  # never opened: the provider waits mid-answer until stopped
    env.backend.push("openai", ScriptStep.reply("partial answer", chunks=4, gate=gate,
                                                gate_after=2))
    streamed = ""
    with broken(env.store, "abort_turn", flaky):
        turn = make_turn("a", turn_id="t-stop")
        async for event in env.engine.run_turn(env.chat_id, turn):
            if event.type == "text_delta":
                streamed += event.text  # type: ignore[union-attr]
                if len(streamed) >= len("partial"):
                    await env.engine.stop("t-stop")
    assert len(failed) == failures and failed[0]
    record = await env.store.load_turn("t-stop")
    assert record.status is TurnStatus.ABORTED and record.reason == "stopped", record
    return streamed, (await env.store.list_messages(env.chat_id))[-1]


async def test_a_stopped_answer_keeps_its_text_when_the_abort_meets_an_outage(
        env: Env) -> None:
    """The abort's first two writes fail as a database restart does: the third, with
    the parts, lands (before: the second was sent without them, the answer empty)."""
    streamed, answer = await _stopped_mid_answer(
        env, StorageUnavailable("the database restarts"), failures=2)
    assert streamed and answer.status == "aborted"
    assert answer.parts == (TextPart(text=streamed),)


async def test_parts_the_store_refuses_are_still_dropped(env: Env) -> None:
    """A refusal (not an outage): the abort is recorded without the parts, as before."""
    _, answer = await _stopped_mid_answer(env, PersistenceRefused("too big"), failures=1)
    assert answer.status == "aborted" and answer.parts == ()
