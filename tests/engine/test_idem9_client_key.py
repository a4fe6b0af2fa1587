"""``TurnInput.client_key`` in the engine (helper "idem9"): validated when the input is
built; a turn whose key a turn of the chat holds does not run (``TurnKeyRecorded``
naming that turn, no provider request), attached or detached."""

from __future__ import annotations

import pytest

from tests.engine.support import Env, make_turn
from turnstate.core import InvalidInput, TurnKeyRecorded
from turnstate.emulators._scripted import ScriptStep


@pytest.mark.parametrize("key", ["", "k" * 256, "caf\u00e9", "a\nb", 7])
def test_a_bad_key_is_invalid_input_naming_it(key: object) -> None:
    with pytest.raises(InvalidInput) as refused:
        make_turn("hello", client_key=key)
    assert refused.value.field == "client_key"


def test_a_key_is_up_to_255_printable_ascii_characters() -> None:
    assert make_turn("hello", client_key="K-1 x" + "k" * 250).client_key is not None


async def test_a_repeated_key_runs_no_second_turn(env: Env) -> None:
    env.backend.push("openai", ScriptStep.reply("hi there", chunks=2))
    done = await env.turn("hello", client_key="retry-1")
    assert len(env.backend.requests) == 1
    with pytest.raises(TurnKeyRecorded) as again:
        await env.turn("hello", client_key="retry-1")
    assert again.value.turn_id == done.final.turn_id
    with pytest.raises(TurnKeyRecorded):
        await env.engine.start_turn(env.chat_id, make_turn("hello", client_key="retry-1"))
    assert len(env.backend.requests) == 1
    assert len(await env.store.list_turns(env.chat_id)) == 1
