"""A chat backend embedding turnstate: aiohttp, Server-Sent Events, public names only.

Routes (JSON in, JSON or SSE out):

    POST /chats                          -> {"id": ...}
    POST /chats/{chat}/turns             -> SSE of the turn's events (``id:`` lines)
         {"provider", "model", "system", "text", "images": [{"mediaType", "base64"}],
          "settings": {"temperature", "maxOutputTokens"}, "turnId"?}
    GET  /chats/{chat}/turns/{turn}/events   -> SSE resumed after ``Last-Event-ID``
    POST /chats/{chat}/turns/{turn}/stop     -> {"status": ...}
    GET  /chats/{chat}                   -> {"messages": [...], "costUsd": "..."}

Turns run detached (``start_turn``): a client that drops its stream reconnects with
``Last-Event-ID`` and gets the rest (``follow``); ``stop`` works from any request. The
app runs the engine's sweeps (``maintain``) and closes the engine at its cleanup, before
the store and the transport close.
Run it against the loopback emulators: ``python examples/sse_backend.py`` (needs
pytest for ``turnstate.emulators``), then e.g.
``curl -N -XPOST localhost:8080/chats/<id>/turns -d '{"provider": "openai", ...}'``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from turnstate import (
    AiohttpTransport,
    ChatBusy,
    ChatNotFound,
    Following,
    GenerationSettings,
    ImagePart,
    InvalidInput,
    LiveTurn,
    LoggedEvent,
    ProviderAdapter,
    Store,
    TextPart,
    Tool,
    ToolSpec,
    Transport,
    TurnEngine,
    TurnFinished,
    TurnInput,
    TurnNotFound,
    chat_cost,
    message_cost,
    open_store,
)

OWNER = "demo-user"  # a real backend takes it from its authentication
SWEEPS = web.AppKey("sweeps", asyncio.Task[None])


async def utc_now(_arguments: dict[str, Any]) -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


TOOLS = (Tool(spec=ToolSpec(name="utc_now", description="The current UTC time.",
                            parameters={"type": "object", "properties": {}}),
              handler=utc_now, timeout=5.0),)


def turn_input(body: Mapping[str, Any]) -> TurnInput:
    """The client's JSON as a ``TurnInput``; a bad field is ``InvalidInput`` (400)."""
    content: list[Any] = [TextPart(text=str(body.get("text", "")))]
    for index, image in enumerate(body.get("images") or ()):
        try:
            data = base64.b64decode(image["base64"], validate=True)
        except (KeyError, TypeError, binascii.Error):
            field = f"images[{index}].base64"
            raise InvalidInput(field, "not base64") from None
        content.append(ImagePart(media_type=image.get("mediaType"), data=data))
    given = body.get("settings") or {}
    settings = GenerationSettings(temperature=given.get("temperature"),
                                  max_output_tokens=given.get("maxOutputTokens"))
    return TurnInput(provider=body["provider"], model=body["model"], owner=OWNER,
                     system_prompt=body.get("system", ""), content=tuple(content),
                     tools=TOOLS, settings=settings, turn_id=body.get("turnId"))


async def stream(request: web.Request, engine: TurnEngine, chat_id: str, turn_id: str,
                 after: int) -> web.StreamResponse:
    """The turn's events after ``after`` as SSE, each with its id for a resume."""
    following: Following = await engine.follow(chat_id, turn_id, after=after, owner=OWNER)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache",
                                           "X-Turn-Id": turn_id})
    await response.prepare(request)
    if following.notice is not None:  # earlier events are gone (the log's cap, expiry)
        await response.write(f"event: notice\ndata: \"{following.notice}\"\n\n".encode())
    async for event in following.events:  # the turn runs on if this write fails
        await response.write(sse_block(event))
    await response.write_eof()
    return response


def sse_block(event: LoggedEvent) -> bytes:
    """One SSE event: its id (what ``Last-Event-ID`` resumes after), type and JSON."""
    return f"id: {event.id}\nevent: {event.type}\ndata: {event.data}\n\n".encode()


def make_app(engine: TurnEngine) -> web.Application:
    async def create_chat(_request: web.Request) -> web.Response:
        chat = await engine.store.create_chat(owner=OWNER)
        return web.json_response({"id": chat.id})

    async def post_turn(request: web.Request) -> web.StreamResponse:
        chat_id = request.match_info["chat"]
        live: LiveTurn = await engine.start_turn(chat_id, turn_input(await request.json()))
        return await stream(request, engine, chat_id, live.turn_id, after=0)

    async def resume(request: web.Request) -> web.StreamResponse:
        after = int(request.headers.get("Last-Event-ID", "0") or 0)
        return await stream(request, engine, request.match_info["chat"],
                            request.match_info["turn"], after)

    async def stop(request: web.Request) -> web.Response:
        try:
            record = await engine.stop(request.match_info["turn"], owner=OWNER,
                                       chat_id=request.match_info["chat"])
        except TurnFinished as exc:
            return web.json_response({"status": "finished", "reason": exc.reason})
        return web.json_response({"status": record.status.value})

    async def get_chat(request: web.Request) -> web.Response:
        messages = await engine.store.list_messages(request.match_info["chat"], owner=OWNER)
        total = chat_cost(messages)
        return web.json_response({
            "messages": [{"seq": m.seq, "role": m.role, "status": m.status.value,
                          "text": m.text(),
                          "costUsd": None if (c := message_cost(m)) is None else str(c.total)}
                         for m in messages],
            "costUsd": None if total is None else str(total.total)})

    @web.middleware
    async def errors(request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            response: web.StreamResponse = await handler(request)
        except InvalidInput as exc:
            return web.json_response({"error": "invalid_input", "field": exc.field,
                                      "detail": str(exc)}, status=400)
        except (ChatNotFound, TurnNotFound):
            return web.json_response({"error": "not_found"}, status=404)
        except ChatBusy:
            return web.json_response({"error": "chat_busy"}, status=409)
        except (KeyError, ValueError) as exc:  # a missing or malformed field
            return web.json_response({"error": "bad_request", "detail": str(exc)},
                                     status=400)
        return response

    async def start_sweeps(app: web.Application) -> None:
        """The engine's sweeps while the app runs: a dead node's turns ended, old event
        logs deleted (``aclose`` ends them)."""
        app[SWEEPS] = asyncio.create_task(engine.maintain())

    async def close_engine(app: web.Application) -> None:
        """At shutdown, while the streams are still open (``on_shutdown`` runs before
        aiohttp waits for the handlers, ``on_cleanup`` after): the turns still running
        end ``cancelled``, each stream gets that final event, the sweeps end. Before the
        store and the transport close."""
        await engine.aclose()
        await asyncio.wait([app[SWEEPS]])

    app = web.Application(middlewares=[errors])
    app.on_startup.append(start_sweeps)
    app.on_shutdown.append(close_engine)
    app.router.add_post("/chats", create_chat)
    app.router.add_post("/chats/{chat}/turns", post_turn)
    app.router.add_get("/chats/{chat}/turns/{turn}/events", resume)
    app.router.add_post("/chats/{chat}/turns/{turn}/stop", stop)
    app.router.add_get("/chats/{chat}", get_chat)
    return app


def build(store: Store, adapters: Mapping[str, ProviderAdapter],
          transport: Transport) -> web.Application:
    """The app on a store, the adapters by provider name, and one transport."""
    return make_app(TurnEngine(store, adapters, transport))


async def main() -> None:  # pragma: no cover - a manual run
    from turnstate.emulators import EmulatedProviders  # noqa: PLC0415 - tests' package

    async with EmulatedProviders() as providers, AiohttpTransport() as transport, \
            open_store("chats.sqlite") as store:
        runner = web.AppRunner(build(store, providers.adapters, transport))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 8080).start()
        print("listening on http://127.0.0.1:8080")
        await asyncio.Event().wait()


if __name__ == "__main__":  # pragma: no cover
    asyncio.run(main())
