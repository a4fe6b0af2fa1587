"""The UI message stream through the real ``ai`` npm package (the Vercel AI SDK).

``tests/server/aisdk/read_stream.mjs`` runs the SDK's own ``DefaultChatTransport`` (what
``useChat`` uses) against ``POST /api/ui-messages`` and ``readUIMessageStream`` builds
the UI message; the test asserts it equals the stored turn, as
``GET /api/ui-messages/{chat}`` gives it. Needs Node and ``npm ci`` in
tests/server/aisdk (``.ci/run`` does it); skips with the reason otherwise, except under
``CI=true``, where it fails.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests import pg_support
from tests.server.support import Api
from tests.server.test_content_parts import png

HERE = Path(__file__).resolve().parent / "aisdk"


def _missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not (HERE / "node_modules" / "ai" / "package.json").is_file():
        return "the ai package is not installed: npm ci --prefix tests/server/aisdk"
    return None


_MISSING = _missing()
if _MISSING and pg_support.in_ci():
    raise RuntimeError(f"the AI SDK test cannot run in CI: {_MISSING}")
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=_MISSING or "")


async def read_through_sdk(api: Api, chat: str, text: str, *,
                          files: Sequence[dict[str, Any]] = (), **body: Any) -> dict[str, Any]:
    """One turn sent by the SDK's transport; ``files`` are the user message's
    ``FileUIPart`` objects (``sendMessage({text, files})``)."""
    server = api.client.server
    proc = await asyncio.create_subprocess_exec(
        "node", str(HERE / "read_stream.mjs"), f"http://{server.host}:{server.port}",
        "alice-token", chat, text, json.dumps({"provider": "openai", "model": "gpt-4o",
                                               **body}), json.dumps(list(files)),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out)  # type: ignore[no-any-return]


async def sdk_reconnected(api: Api, chat: str) -> asyncio.subprocess.Process:
    """The SDK's transport reconnecting to ``chat``'s running turn (``--reconnect``),
    once it says it is connected; read its result with ``communicate()``."""
    server = api.client.server
    proc = await asyncio.create_subprocess_exec(
        "node", str(HERE / "read_stream.mjs"), f"http://{server.host}:{server.port}",
        "alice-token", chat, "--reconnect", "{}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    assert (await asyncio.wait_for(proc.stderr.readline(), 60)) == b"connected\n"
    return proc


def without_progress(message: dict[str, Any]) -> dict[str, Any]:
    """The message without the parts only a live stream has (degradation, fallback and
    context notices); ``GET /api/ui-messages`` keeps text, reasoning, tools, steps and
    the ``data-turn`` summary."""
    live_only = {"data-degradation", "data-fallback", "data-context"}
    return {**message, "parts": [p for p in message["parts"] if p["type"] not in live_only]}


async def stored(api: Api, chat: str) -> list[dict[str, Any]]:
    return await api.json("GET", f"/api/ui-messages/{chat}")  # type: ignore[no-any-return]


async def test_a_turn_a_tool_loop_and_a_fallback_read_back_as_the_stored_turns(
        api: Api) -> None:
    chat = await api.new_chat()
    first = await read_through_sdk(api, chat, "Hello **there**")
    assert first["errors"] == []
    types = [c["type"] for c in first["chunks"]]
    assert types[0] == "start" and types[-1] == "finish" and "data-context" in types
    assert first["message"]["id"] == first["chunks"][0]["messageId"]  # the turn id
    history = await stored(api, chat)
    assert without_progress(first["message"]) == history[1]
    assert history[1]["parts"][1] == {"type": "text", "text": "You said: Hello **there**",
                                      "state": "done"}

    tool = await read_through_sdk(api, chat, '[[call:weather {"city": "Lisbon"}]] Weather?',
                                  tools=["weather"])
    history = await stored(api, chat)
    assert without_progress(tool["message"]) == history[3]
    kinds = [p["type"] for p in tool["message"]["parts"]]
    assert kinds.count("step-start") == 2 and "tool-weather" in kinds
    call = next(p for p in tool["message"]["parts"] if p["type"] == "tool-weather")
    assert call["state"] == "output-available" and call["input"] == {"city": "Lisbon"}
    assert call["output"]["forecast"] == "sunny"

    fallback = await read_through_sdk(api, chat, "And now?", system_prompt="Be chatty.")
    notices = [p["data"] for p in fallback["message"]["parts"] if p["type"] == "data-fallback"]
    assert [n["reason"] for n in notices] == ["system_prompt_changed"]
    turn = next(p["data"] for p in fallback["message"]["parts"] if p["type"] == "data-turn")
    assert (turn["strategy"], turn["outcome"]) == ("replay", "completed")
    assert without_progress(fallback["message"]) == (await stored(api, chat))[5]


def file_ui_part(media_type: str, filename: str, raw: bytes) -> dict[str, Any]:
    """A ``FileUIPart`` as ``useChat`` makes one from a picked file (a ``data:`` URL)."""
    return {"type": "file", "mediaType": media_type, "filename": filename,
            "url": f"data:{media_type};base64,{base64.b64encode(raw).decode()}"}


def decoded(part: dict[str, Any]) -> tuple[str, str | None, bytes]:
    """A ``file`` part's media type, filename and bytes (its ``data:`` URL decoded)."""
    head, _, data = part["url"].partition(",")
    assert head == f"data:{part['mediaType']};base64"
    return part["mediaType"], part.get("filename"), base64.b64decode(data, validate=True)


async def test_an_image_and_a_pdf_sent_by_the_sdk_come_back_as_file_parts(api: Api) -> None:
    chat = await api.new_chat()
    picture, pdf = png(), b"%PDF-1.4\n% a tiny document\n"
    for sent in (file_ui_part("image/png", "grey.png", picture),
                 file_ui_part("application/pdf", "r\u00e9sum\u00e9.pdf", pdf)):
        turn = await read_through_sdk(api, chat, "What is this?", files=[sent])
        assert turn["errors"] == []
        said = "".join(p["text"] for p in turn["message"]["parts"] if p["type"] == "text")
        raw = decoded(sent)[2]
        assert f"an {sent['mediaType']} of {len(raw):,} bytes" in said
        history = await stored(api, chat)
        question, answer = history[-2:]
        assert question["role"] == "user"
        (file,) = [p for p in question["parts"] if p["type"] == "file"]
        seq = len(history) - 1  # the question's seq: the bytes by the route, not inline
        assert file["url"] == f"/api/chats/{chat}/messages/{seq}/parts/1"
        served = await api.call("GET", file["url"])
        assert (file["mediaType"], file.get("filename"), await served.read()) \
            == decoded(sent)
        assert "What is this?" in [p.get("text") for p in question["parts"]]
        assert without_progress(turn["message"]) == answer


async def test_an_aborted_turn_is_an_error_the_sdk_reports(api: Api) -> None:
    chat = await api.new_chat()
    fault = {"provider": "openai", "kind": "error"}
    await api.json("POST", "/api/emulator/faults", json=fault)
    failed = await read_through_sdk(api, chat, "This one fails")
    assert failed["errors"] == [
        "Aborted: the provider returned an error (HTTP 400: Injected failure "
        "(turnstate serve emulator control))"] or failed["errors"][0].startswith(
        "Aborted: the provider returned an error")
    assert [c["type"] for c in failed["chunks"]][-2:] == ["error", "finish"]
    turn = next(p["data"] for p in failed["message"]["parts"] if p["type"] == "data-turn")
    assert (turn["outcome"], turn["reason"]) == ("aborted", "provider_failed")
    assert without_progress(failed["message"]) == (await stored(api, chat))[1]


async def test_the_sdk_reconnects_to_a_running_turn(api: Api) -> None:
    """``reconnectToStream`` replays the running turn into the same message id; the turn
    ends (a Stop here) and the SDK's message is the stored one."""
    chat = await api.new_chat()
    hang = {"provider": "openai", "kind": "hang", "after_events": 4}
    await api.json("POST", "/api/emulator/faults", json=hang)
    started = await api.call("POST", "/api/ui-messages", json={
        "id": chat, "messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}],
        "provider": "openai", "model": "gpt-4o"})
    first = await started.content.readuntil(b"\n\n")
    turn_id = json.loads(first[len(b"data: "):])["messageId"]
    proc = await sdk_reconnected(api, chat)
    await api.json("POST", f"/api/chats/{chat}/turns/{turn_id}/stop", status=202)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    resumed = json.loads(out)
    started.close()
    assert resumed["message"]["id"] == turn_id
    assert [c["type"] for c in resumed["chunks"]][-1] == "abort"
    turn = next(p["data"] for p in resumed["message"]["parts"] if p["type"] == "data-turn")
    assert (turn["turnId"], turn["outcome"]) == (turn_id, "aborted")
    assert (await api.call("GET", f"/api/ui-messages/{chat}/stream")).status == 204


async def test_resume_answers_nothing_to_resume_and_other_owners_get_404(api: Api) -> None:
    chat = await api.new_chat()
    assert (await api.call("GET", f"/api/ui-messages/{chat}/stream")).status == 204
    assert (await api.call("GET", f"/api/ui-messages/{chat}/stream", "bob")).status == 404
    refused = await api.call("POST", "/api/ui-messages", "bob", json={
        "id": chat, "messages": [], "provider": "openai", "model": "gpt-4o"})
    assert refused.status == 404


async def test_an_answers_sources_reach_the_sdk_as_source_url_parts(api: Api) -> None:
    """wire6: the emulated Responses answer cites two pages (``url_citation``
    annotations, streamed as ``output_text.annotation.added``) and a ``javascript:`` URL;
    the SDK gets the two http(s) ones as ``source-url`` parts, each once, and the stored
    message says the same."""
    chat = await api.new_chat()
    turn = await read_through_sdk(
        api, chat, "[[cite:https://example.com/a]] [[cite:javascript:alert(1)]] "
                   "[[cite:https://example.com/b?x=1&y=<2>]] [[cite:https://example.com/a]] Hi")
    assert turn["errors"] == []
    sources = [p for p in turn["message"]["parts"] if p["type"] == "source-url"]
    assert sources == [
        {"type": "source-url", "sourceId": "source-1", "url": "https://example.com/a",
         "title": "Source 1"},
        {"type": "source-url", "sourceId": "source-2", "url": "https://example.com/b?x=1&y=<2>",
         "title": "Source 3"}]
    assert without_progress(turn["message"]) == (await stored(api, chat))[1]
