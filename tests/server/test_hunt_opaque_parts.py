"""Blocks kept opaque (an OpenAI ``compaction`` item with its ``encrypted_content``,
server-tool calls) are "never shown" (``OpaquePart``): the chat view names their kind
only, the UI messages leave them out.

The chat view showed every stored part but its ``signature`` and ``data`` keys, so an
opaque part went out whole, its ``raw`` JSON with the provider's encrypted payload.
"""

from __future__ import annotations

from tests.server.support import Api
from turnstate.core._conversation import OpaquePart, TextPart
from turnstate.testing._records import commit, start

COMPACTION = OpaquePart(provider="openai", model="gpt-4o", kind="compaction",
                        raw='{"type":"compaction","id":"cmp_1","encrypted_content":"SECRET"}')


async def test_an_opaque_part_is_not_shown(api: Api) -> None:
    chat = await api.new_chat()
    store = api.services.store
    lease = await store.begin_turn(chat, start("t1"))
    await store.commit_turn(lease, commit(None, parts=(COMPACTION, TextPart(text="hi"))))
    view = await api.call("GET", f"/api/chats/{chat}")
    assert view.status == 200
    assert "SECRET" not in await view.text()
    answer = (await view.json())["messages"][-1]
    assert answer["parts"][0] == {"type": "opaque", "provider": "openai", "model": "gpt-4o",
                                  "kind": "compaction"}
    ui = await api.call("GET", f"/api/ui-messages/{chat}")
    assert "SECRET" not in await ui.text()
