"""What an embedder catches (embed4): every error class turnstate exports has a stable
``error_code`` to answer its own clients with, documented; and ``start_turn`` on a
closed engine is a typed refusal. Before: no error had a code of its own (only a
provider error's ``code``, the provider's), and ``start_turn`` after ``aclose`` began a
turn (taking the chat's lease and writing it) that no one would end or wait for: closing
the store next left its runner failing in the background ("the store is closed")."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import turnstate
from turnstate import (
    ChatBusy,
    EngineClosed,
    ProviderError,
    TurnEngine,
    TurnInput,
    TurnstateError,
)
from turnstate.emulators import EmulatedProviders
from turnstate.testing import emulated_engine, emulated_providers

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest

API = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
ERRORS = {name: value for name in turnstate.__all__
          if inspect.isclass(value := getattr(turnstate, name))
          and issubclass(value, TurnstateError)}


def test_every_exported_error_has_its_own_stable_code() -> None:
    codes = {name: cls.error_code for name, cls in ERRORS.items()}
    assert len(set(codes.values())) == len(codes)
    assert codes["ChatBusy"] == "chat_busy" and codes["InvalidInput"] == "invalid_input"
    assert codes["TurnstateError"] == "turnstate_error"
    for name, code in codes.items():  # the documented rule: the name in snake_case
        assert code == re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower(), name
    assert ChatBusy("c", "t").error_code == "chat_busy"  # on instances too
    failure = ProviderError("openai", "boom", code="server_error")
    assert (failure.error_code, failure.code) == ("provider_error", "server_error")


def test_the_errors_section_documents_every_error_and_the_code() -> None:
    section = API[API.index("## Errors"):API.index("## Other")]
    documented = set(re.findall(r"^- `(\w+)`:", section, re.M))
    assert documented == set(ERRORS)
    assert "`error_code`" in section and "snake_case" in section


async def test_start_turn_on_a_closed_engine_is_refused_before_the_chat_is_touched(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders) -> None:
    chat = await emulated_engine.store.create_chat(owner="o")
    await emulated_engine.aclose()
    turn = TurnInput(provider="openai", model="gpt-4o", system_prompt="s", user_text="hi")
    with pytest.raises(EngineClosed) as caught:
        await emulated_engine.start_turn(chat.id, turn)
    assert caught.value.error_code == "engine_closed"
    assert await emulated_engine.store.list_turns(chat.id) == ()
    assert (await emulated_engine.store.load_chat(chat.id)).active_turn_id is None
    assert emulated_providers.emulators["openai"].requests == []
