"""The JSON API: auth, tenancy, listing, the chat view, edits, deletes, bad input."""

from __future__ import annotations

import hmac
import json
import re
from typing import Any

import attrs
import pytest

from tests.server.support import Api, turn_body
from turnstate.server import ServerConfig, TokenBook, calculate, parse_tokens
from turnstate.server._tools import CalculatorError


@pytest.mark.parametrize("header", [None, "Bearer nope", "Basic alice-token", "Bearer ",
                                    "bearer alice-tokenX"])
async def test_api_routes_need_a_valid_bearer_token(api: Api, header: str | None) -> None:
    headers = {} if header is None else {"Authorization": header}
    for method, path in (("GET", "/api/chats"), ("POST", "/api/chats"),
                         ("GET", "/api/config"), ("GET", "/api/chats/x")):
        response = await api.client.request(method, path, headers=headers)
        assert response.status == 401
        assert (await response.json())["error"] == "unauthorized"
    assert (await api.client.get("/healthz")).status == 200


async def test_bearer_scheme_is_case_insensitive(api: Api) -> None:
    response = await api.client.get("/api/chats", headers={"Authorization": "bearer alice-token"})
    assert response.status == 200


def test_token_book_finds_owners_and_never_shows_tokens() -> None:
    book = TokenBook({"t1": "alice", "t2": "bob", "t3": "alice"})
    assert [book.owner_of(t) for t in ("t1", "t2", "t3", "t", "t11", "")] == \
        ["alice", "bob", "alice", None, None, None]
    assert "t1" not in repr(book)
    assert book.owner_of("\udcff") is None  # lone surrogates do not crash the lookup


def test_a_token_costs_one_comparison_however_many_tokens_there_are(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One digest lookup and one constant-time comparison per request (issue 26), not a
    comparison with each of the server's tokens."""
    book = TokenBook({f"token-{i}": f"owner-{i}" for i in range(10_000)})
    compared: list[bytes] = []
    real = hmac.compare_digest

    def counted(a: bytes, b: bytes) -> bool:
        compared.append(b)
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counted)
    assert book.owner_of("token-4321") == "owner-4321"
    assert book.owner_of("token-x") is None
    assert len(compared) == 2


def test_token_file_format() -> None:
    assert parse_tokens("# c\nalice: t1\n\n bob :t2 # note\n") == {"t1": "alice", "t2": "bob"}
    for bad in ("alice t1", ": t1", "alice:", "a: t1\nb: t1", "", "alice: two words"):
        with pytest.raises(ValueError) as raised:
            parse_tokens(bad, "f")
        assert "t1" not in str(raised.value)


async def test_config_lists_registry_models_and_tools(api: Api) -> None:
    config = await api.json("GET", "/api/config")
    providers = {p["name"]: p for p in config["providers"]}
    assert set(providers) == {"openai", "gemini", "openai-compatible", "anthropic", "deepseek"}
    assert providers["openai"]["durable"] and not providers["anthropic"]["durable"]
    small = [m for m in providers["openai-compatible"]["models"]
             if m["name"] == "demo-small-context"]
    assert small == [{"name": "demo-small-context", "contextLimit": 2048, "minOutputTokens": 1,
                      "maxOutputTokens": 4096, "reasoningEfforts": []}]
    assert {t["name"] for t in config["tools"]} == {"weather", "calculator", "clock"}
    assert config["owner"] == "alice" and config["emulated"] is True


async def test_chats_are_listed_per_owner_newest_first_and_paged(api: Api) -> None:
    ids = [await api.new_chat() for _ in range(5)]
    await api.new_chat("bob")
    await api.turn(ids[1], text="bump me")  # now the most recently updated
    listed = await api.json("GET", "/api/chats")
    assert [c["id"] for c in listed["chats"]] == [ids[1], ids[4], ids[3], ids[2], ids[0]]
    assert listed["chats"][0]["title"] == "bump me" and listed["next"] is None
    seen: list[str] = []
    path = "/api/chats?limit=2"
    while True:
        page = await api.json("GET", path)
        seen += [c["id"] for c in page["chats"]]
        if page["next"] is None:
            break
        path = f"/api/chats?limit=2&after={page['next']}"
    assert seen == [c["id"] for c in listed["chats"]]
    assert [c["id"] for c in (await api.json("GET", "/api/chats", "bob"))["chats"]] != seen
    for query in ("limit=0", "limit=abc", "limit=101", "after=%%%", "after=bm90IGpzb24"):
        body = await api.json("GET", f"/api/chats?{query}", status=400)
        assert body["error"] == "invalid_field" and body["field"] in {"limit", "after"}


async def test_chat_view_has_messages_audit_context_and_a_redacted_cursor(api: Api) -> None:
    chat_id = await api.new_chat()
    await api.turn(chat_id, text="[[call:weather]] weather?", tools=["weather"])
    await api.turn(chat_id, text="thanks", tools=["weather"])
    view = await api.json("GET", f"/api/chats/{chat_id}")
    assert [m["seq"] for m in view["messages"]] == [1, 2, 3, 4]
    first, second = view["messages"][1]["turn"], view["messages"][3]["turn"]
    assert first["strategy"] == "replay" and second["strategy"] == "cursor"
    assert first["path"] == ["validate", "replay", "tool_iteration", "cursor", "persist", "done"]
    assert [p["type"] for p in view["messages"][1]["parts"]] == ["tool_call", "tool_result",
                                                                 "text"]
    assert second["usage"]["inputTokens"] > 0 and "cacheHitTokens" in second
    assert view["context"]["severity"] == "normal" and view["context"]["source"] == "provider"
    continuation = view["continuation"]
    assert continuation["provider"] == "openai" and continuation["mode"] == "responses"
    assert continuation["cursor"] == "<redacted>" and continuation["ageSeconds"] >= 0
    assert "resp_" not in json.dumps(view)  # the cursor itself never leaves the server


async def test_another_owner_sees_not_found_exactly_like_a_missing_chat(api: Api) -> None:
    chat_id = await api.new_chat()
    await api.turn(chat_id)
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", "/api/chats/CHAT", {}),
        ("DELETE", "/api/chats/CHAT", {}),
        ("POST", "/api/chats/CHAT/turns", {"json": turn_body()}),
        ("PATCH", "/api/chats/CHAT/messages/1", {"json": {"text": "x"}}),
        ("DELETE", "/api/chats/CHAT/messages/1", {}),
        ("POST", "/api/emulator/expire-cursor", {"json": {"chat_id": "CHAT"}}),
    ]
    for method, path, kwargs in calls:
        answers = []
        for target in (chat_id, "no-such-chat"):
            filled = json.loads(json.dumps(kwargs).replace("CHAT", target))
            response = await api.call(method, path.replace("CHAT", target), "bob", **filled)
            answers.append((response.status, await response.json()))
        assert answers[0] == answers[1] == (404, {"status": 404, "error": "not_found",
                                                  "message": "no such chat"}), (method, path)
    assert len((await api.json("GET", f"/api/chats/{chat_id}"))["messages"]) == 2
    assert (await api.json("GET", "/api/chats", "bob"))["chats"] == []


async def test_edit_clears_the_cursor_and_the_next_turn_replays(api: Api) -> None:
    chat_id = await api.new_chat()
    await api.turn(chat_id, text="one")
    view = await api.json("PATCH", f"/api/chats/{chat_id}/messages/1", json={"text": "uno"})
    assert view["messages"][0]["parts"][0]["text"] == "uno"
    assert view["continuation"] is None
    events = await api.turn(chat_id, text="two")
    final = events[-1].data
    assert final["strategy"] == "replay" and final["path"][0]["trigger"] == "no_stored_state"
    body = await api.json("PATCH", f"/api/chats/{chat_id}/messages/2", json={"text": "x"},
                          status=400)
    assert body["field"] == "seq"  # assistant messages are not the user's to edit
    assert (await api.json("PATCH", f"/api/chats/{chat_id}/messages/9", json={"text": "x"},
                           status=404))["error"] == "message_not_found"


async def test_delete_from_a_message_cuts_the_tail(api: Api) -> None:
    chat_id = await api.new_chat()
    for text in ("one", "two", "three"):
        await api.turn(chat_id, text=text)
    body = await api.json("DELETE", f"/api/chats/{chat_id}/messages/3")
    assert body["deleted"] == 4 and [m["seq"] for m in body["messages"]] == [1, 2]
    assert body["continuation"] is None
    events = await api.turn(chat_id, text="again")
    assert events[-1].data["strategy"] == "replay"
    assert [m["seq"] for m in (await api.json("GET", f"/api/chats/{chat_id}"))["messages"]] \
        == [1, 2, 3, 4]


async def test_delete_chat(api: Api) -> None:
    chat_id = await api.new_chat()
    await api.turn(chat_id)
    assert (await api.call("DELETE", f"/api/chats/{chat_id}")).status == 204
    assert (await api.call("GET", f"/api/chats/{chat_id}")).status == 404
    assert (await api.json("GET", "/api/chats"))["chats"] == []


@pytest.mark.parametrize(("body", "status", "field"), [
    (turn_body(provider="nope"), 400, "provider"),
    (turn_body(provider=7), 400, "provider"),
    (turn_body(model="gpt-99"), 400, "model"),
    (turn_body(text=""), 400, "text"),
    (turn_body(text=None), 400, "text"),
    (turn_body(text="x" * 2_001), 413, "text"),
    (turn_body(system_prompt="x" * 2_001), 413, "system_prompt"),
    (turn_body(system_prompt=["x"]), 400, "system_prompt"),
    (turn_body(tools=["weather", "nope"]), 400, "tools"),
    (turn_body(tools="weather"), 400, "tools"),
    (turn_body(tools=["weather", "weather"]), 400, "tools"),
    (turn_body(compaction="yes"), 400, "compaction"),
])
async def test_bad_turn_requests_name_the_field(api: Api, body: dict[str, Any], status: int,
                                                field: str) -> None:
    chat_id = await api.new_chat()
    before = sum(len(e.requests) for e in api.stack.emulators.values())
    answer = await api.json("POST", f"/api/chats/{chat_id}/turns", json=body, status=status)
    assert answer["field"] == field
    assert sum(len(e.requests) for e in api.stack.emulators.values()) == before
    assert (await api.json("GET", f"/api/chats/{chat_id}"))["messages"] == []


async def test_malformed_bodies_are_json_errors_not_tracebacks(api: Api) -> None:
    chat_id = await api.new_chat()
    path = f"/api/chats/{chat_id}/turns"
    cases = [(b"{not json", 400, "invalid_json"), (b"[1, 2]", 400, "invalid_json"),
             (b"\xff\xfe", 400, "invalid_json"),
             (json.dumps(turn_body(text="a" * 300_000)).encode(), 413, "body_too_large"),
             (b'{"provider": "openai", "model": "gpt-4o", "text": "\\ud800"}', 400,
              "invalid_field")]
    for raw, status, error in cases:
        response = await api.call("POST", path, data=raw,
                                  headers={"Content-Type": "application/json"})
        assert response.status == status
        body = await response.json()
        assert body["error"] == error and "Traceback" not in json.dumps(body)


async def test_cors_is_off_by_default(api: Api) -> None:
    response = await api.call("GET", "/api/chats", headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in response.headers
    preflight = await api.client.options("/api/chats", headers={"Origin": "https://x.example"})
    assert "Access-Control-Allow-Origin" not in preflight.headers


@pytest.mark.parametrize("config", [ServerConfig(cors_origin="https://chat.example")])
async def test_cors_allows_only_the_configured_origin(api: Api) -> None:
    good = await api.client.options("/api/chats", headers={"Origin": "https://chat.example"})
    assert good.status == 204
    assert good.headers["Access-Control-Allow-Origin"] == "https://chat.example"
    other = await api.client.get("/api/chats", headers={**api.headers(),
                                                        "Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in other.headers


async def test_page_and_static_files_are_served_without_a_build(api: Api) -> None:
    page = await api.client.get("/")
    assert page.status == 200 and "default-src 'self'" in page.headers["Content-Security-Policy"]
    html = await page.text()
    for asset in ("/static/app.js", "/static/style.css"):
        assert asset in html
        assert (await api.client.get(asset)).status == 200
    assert "http://" not in html and "https://" not in html  # no CDN


async def test_every_page_module_import_is_served_as_javascript(api: Api) -> None:
    """The page is split into ES modules: each one app.js reaches is served, none is missing."""
    seen: set[str] = set()
    queue = ["app.js"]
    while queue:
        name = queue.pop()
        if name in seen:
            continue
        seen.add(name)
        response = await api.client.get(f"/static/{name}")
        assert response.status == 200, name
        assert response.content_type in {"application/javascript", "text/javascript"}, name
        source = await response.text()
        queue += re.findall(r'^import [^;]* from "\./([\w/.-]+)";', source, re.MULTILINE)
    assert {"app.js", "api.js", "composer.js", "stream.js", "messages.js"} <= seen


def test_calculator_is_arithmetic_only() -> None:
    assert calculate("2 * (3 + 4) - 1 / 4") == 13.75
    assert calculate("-2 ** 3") == -8
    for bad in ("__import__('os')", "a + 1", "9 ** 999", "1 / 0", "[1]", "x" * 300, "1 +"):
        with pytest.raises(CalculatorError):
            calculate(bad)


async def test_the_engines_own_input_limits_answer_400_naming_the_field(api: Api) -> None:
    """A limit the engine enforces (here its user-text limit) is a 400, not a 500."""
    limits = api.services.engine.limits
    api.services.engine.limits = attrs.evolve(limits, max_user_text=10)
    chat_id = await api.new_chat()
    body = await api.json("POST", f"/api/chats/{chat_id}/turns", json=turn_body("x" * 11),
                          status=400)
    assert body["error"] == "invalid_field" and body["field"] == "text"
    api.services.engine.limits = limits


async def test_requests_and_bytes_sent_are_stored_with_each_completed_turn(api: Api) -> None:
    """The chat view shows each turn's requests and bytes from the store, as streamed."""
    chat_id = await api.new_chat()
    loop = await api.turn(chat_id, text="[[call:weather]] weather?", tools=["weather"])
    plain = await api.turn(chat_id, text="thanks", tools=["weather"])
    streamed = [events[-1].data["stats"] for events in (loop, plain)]
    assert [s["requests"] for s in streamed] == [2, 1]
    turns = [m["turn"] for m in (await api.json("GET", f"/api/chats/{chat_id}"))["messages"]
             if m["role"] == "assistant"]
    assert [(t["requests"], t["requestBytes"]) for t in turns] == \
        [(s["requests"], s["requestBytes"]) for s in streamed]
    (record,) = [m for m in await api.services.store.list_messages(chat_id) if m.seq == 2]
    assert record.provider_state is not None and '"requestBytes"' in record.provider_state


@pytest.mark.parametrize(("method", "path", "field"), [
    ("DELETE", "/messages/%C2%B2", "seq"),
    ("DELETE", "/messages/99999999999999999999", "seq"),
    ("DELETE", "/messages/0", "seq"),
    ("PATCH", "/messages/%EF%BC%91", "seq"),
    ("GET", "?limit=%C2%B2", "limit"),
])
async def test_numbers_in_paths_and_queries_are_ascii_and_bounded(
        api: Api, method: str, path: str, field: str) -> None:
    """Unicode digits ("²", fullwidth "１") and huge numbers are a 400 naming the field,
    never a 500 from ``int()`` or the store's integer range."""
    chat_id = await api.new_chat()
    await api.turn(chat_id)
    url = f"/api/chats/{chat_id}{path}" if path.startswith("/") else f"/api/chats{path}"
    response = await api.call(method, url, json={"text": "x"} if method == "PATCH" else None)
    body = await response.json()
    assert response.status == 400, body
    assert body["field"] == field


async def test_each_turn_shows_its_cost_and_the_chat_its_total(api: Api) -> None:
    from decimal import Decimal

    chat_id = await api.new_chat()
    await api.turn(chat_id, text="[[call:weather]] weather?", tools=["weather"])
    await api.turn(chat_id, text="thanks", tools=["weather"])
    view = await api.json("GET", f"/api/chats/{chat_id}")
    costs = [m["turn"]["costUsd"] for m in view["messages"] if m["role"] == "assistant"]
    assert all(isinstance(c, str) and Decimal(c) > 0 for c in costs)
    assert Decimal(view["costUsd"]) == sum(Decimal(c) for c in costs)
    audit = view["messages"][1]["turn"]["metadata"]["costUsd"]
    assert set(audit) == {"total", "input", "cachedInput", "cacheWrite", "output"}
