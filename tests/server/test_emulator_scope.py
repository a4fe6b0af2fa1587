"""The emulator controls on a shared server: faults belong to the owner who queued them,
and a stored id from one emulator never names another emulator's conversation."""

from __future__ import annotations

from tests.server.support import Api
from turnstate.emulators import OpenAIResponsesEmulator
from turnstate.emulators._base import EmulatorServer


async def test_a_queued_fault_fails_only_its_owners_turn(api: Api) -> None:
    fault = {"provider": "openai", "kind": "error"}
    assert (await api.json("POST", "/api/emulator/faults", json=fault))["pending"] == 1
    bobs = await api.new_chat("bob")
    assert (await api.turn(bobs, "bob"))[-1].event == "turn_completed"
    alices = await api.new_chat()
    final = (await api.turn(alices))[-1]
    assert (final.event, final.data["reason"]) == ("turn_aborted", "provider_failed")
    assert (await api.turn(alices))[-1].event == "turn_completed"


async def test_the_fault_queue_is_bounded_per_owner_and_seconds_must_be_a_number(
        api: Api) -> None:
    fault = {"provider": "gemini", "kind": "error"}
    for _ in range(10):
        await api.json("POST", "/api/emulator/faults", json=fault)
    refused = await api.call("POST", "/api/emulator/faults", json=fault)
    assert refused.status == 429 and (await refused.json())["error"] == "too_many_faults"
    assert (await api.json("POST", "/api/emulator/faults", "bob", json=fault))["pending"] == 1
    for seconds in (True, "5", 0, 601):
        bad = await api.call("POST", "/api/emulator/faults",
                             json={"provider": "gemini", "kind": "stall", "seconds": seconds})
        assert bad.status == 400 and (await bad.json())["field"] == "seconds", seconds


async def test_two_emulators_never_share_a_stored_id() -> None:
    """Node A's cursor is unknown to node B's emulator, not B's own conversation."""
    import aiohttp

    ids = []
    async with EmulatorServer(OpenAIResponsesEmulator()) as a, \
            EmulatorServer(OpenAIResponsesEmulator()) as b, aiohttp.ClientSession() as http:
        for server in (a, b):
            async with http.post(server.base_url + "/v1/responses", json={
                    "model": "gpt-4o", "input": "hello"},
                    headers={"Authorization": "Bearer k"}) as response:
                ids.append((await response.json())["id"])
        assert ids[0] != ids[1] and all(i.startswith("resp_") for i in ids)
        async with http.post(b.base_url + "/v1/responses", json={
                "model": "gpt-4o", "input": "again", "previous_response_id": ids[0]},
                headers={"Authorization": "Bearer k"}) as response:
            assert response.status == 400
            assert (await response.json())["error"]["code"] == "previous_response_not_found"


async def test_a_rate_limit_fault_carries_its_retry_after_to_the_stream(api: Api) -> None:
    fault = {"provider": "openai", "kind": "rate_limit", "retry_after": 20}
    await api.json("POST", "/api/emulator/faults", json=fault)
    final = (await api.turn(await api.new_chat()))[-1]
    assert (final.event, final.data["reason"]) == ("turn_aborted", "provider_failed")
    failure = final.data["failure"]
    assert (failure["status"], failure["errorType"], failure["retryable"],
            failure["retryAfter"]) == (429, "rate_limited", True, 20)
    for seconds in (True, "5", -1, 2.5, 3601):
        bad = await api.call("POST", "/api/emulator/faults", json={
            "provider": "openai", "kind": "rate_limit", "retry_after": seconds})
        assert bad.status == 400 and (await bad.json())["field"] == "retry_after", seconds
