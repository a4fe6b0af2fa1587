"""The reference server's chats go on past the model's window (``overflow="trim"``):
a DeepSeek chat (stateless, no compaction) whose text the provider counts at about
twice the estimate, against the emulator's 3,000-token window. Before, the server took
the engine's default (``abort``) and the first refusal aborted ``provider_failed``; every
later turn of the chat was refused the same way."""

from __future__ import annotations

from tests.server.support import Api


async def test_a_long_dense_chat_keeps_answering(api: Api) -> None:
    emulator = api.stack.emulators["deepseek"]
    emulator.context_windows["deepseek-chat"] = 3_000  # type: ignore[attr-defined]
    emulator.token_ratio = 2.0
    chat = await api.new_chat()
    for number in range(12):
        text = f"turn {number}: " + "lorem ipsum dolor " * 100  # ~460 estimated tokens
        events = await api.turn(chat, provider="deepseek", model="deepseek-chat", text=text)
        assert events[-1].event == "turn_completed", (number, events[-1].data)
    refused = [r for r in emulator.requests if r.json.get("model") == "deepseek-chat"]
    assert len(refused) <= 12 + 3  # each turn one request, bar the refusals that taught
