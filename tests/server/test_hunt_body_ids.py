"""A chat id in a JSON body that UTF-8 cannot encode is a 400 naming the field.

JSON's ``\\ud800`` escape decodes to a lone surrogate; the id went to the store as it was
and SQLite's driver raised ``UnicodeEncodeError`` (a 500) for ``POST /api/ui-messages``
and ``POST /api/emulator/expire-cursor``.
"""

from __future__ import annotations

from tests.server.support import Api

LONE = '"\\ud800"'


async def test_a_ui_turn_for_a_chat_id_without_a_utf8_form_is_a_400(api: Api) -> None:
    body = ('{"id": ' + LONE + ', "provider": "openai", "model": "gpt-4o", "messages": '
            '[{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]}')
    refused = await api.json("POST", "/api/ui-messages", status=400, data=body)
    assert (refused["error"], refused["field"]) == ("invalid_field", "id")


async def test_expiring_the_cursor_of_a_chat_id_without_a_utf8_form_is_a_400(
        api: Api) -> None:
    refused = await api.json("POST", "/api/emulator/expire-cursor", status=400,
                             data='{"chat_id": ' + LONE + "}")
    assert (refused["error"], refused["field"]) == ("invalid_field", "chat_id")
