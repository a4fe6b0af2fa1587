"""The turn body's ``settings.response_format``: the answer as JSON through the reference
server, checked as the other settings are (a 400 naming the field at fault)."""

from __future__ import annotations

import json

from tests.server.support import Api

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}},
          "required": ["city"], "additionalProperties": False}


async def test_a_response_format_reaches_the_wire(api: Api) -> None:
    chat_id = await api.new_chat()
    events = await api.turn(chat_id, text="where?", settings={
        "response_format": {"schema": SCHEMA, "name": "place"}})
    assert events[-1].event == "turn_completed", events[-1]
    body = json.loads(api.stack.emulators["openai"].requests[-1].body)
    assert body["text"]["format"]["type"] == "json_schema"
    assert (body["text"]["format"]["name"], body["text"]["format"]["schema"]) == (
        "place", SCHEMA)


async def test_json_mode_and_null_are_taken(api: Api) -> None:
    chat_id = await api.new_chat()
    events = await api.turn(chat_id, text="answer in JSON", settings={"response_format": {}})
    assert events[-1].event == "turn_completed", events[-1]
    body = json.loads(api.stack.emulators["openai"].requests[-1].body)
    assert body["text"]["format"]["type"] == "json_object"
    events = await api.turn(chat_id, text="plain", settings={"response_format": None})
    assert events[-1].event == "turn_completed", events[-1]
    assert "format" not in json.loads(
        api.stack.emulators["openai"].requests[-1].body).get("text", {})


async def test_a_bad_response_format_is_a_400_naming_it(api: Api) -> None:
    chat_id = await api.new_chat()
    for fmt, field in (("json", "settings.response_format"),
                       (["schema"], "settings.response_format"),
                       ({"colour": 1}, "settings.response_format"),
                       ({"schema": "x"}, "settings.response_format.schema"),
                       ({"name": "a b"}, "settings.response_format.name"),
                       ({"strict": "yes"}, "settings.response_format.strict"),
                       ({"schema": {"type": "array"}}, "settings.response_format.schema")):
        refused = await api.json("POST", f"/api/chats/{chat_id}/turns", status=400,
                                 json={"provider": "openai", "model": "gpt-4o",
                                       "text": "hi", "settings": {"response_format": fmt}})
        assert (refused["error"], refused["field"]) == ("invalid_field", field), (fmt, refused)
    assert not api.stack.emulators["openai"].requests
