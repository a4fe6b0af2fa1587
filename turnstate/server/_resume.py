"""Turn streams that outlive their connection: resume them, stop them, from any node.

A turn runs detached from the client that started it (``TurnEngine.start_turn``); every
stream of it, the starting ``POST .../turns`` and any ``GET .../turns/{turn_id}/events``,
follows the turn's numbered events (each sent with its SSE ``id:``) to the final one.
A resume names the last id it saw (``Last-Event-ID``, else ``?after=``) and gets the
events after it: from memory on the node running the turn, else from the store's
turn-events log. ``POST .../turns/{turn_id}/stop`` records a stop that the node running
the turn acts on; a turn that already ended answers 409 ``turn_finished``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

from aiohttp import web

from turnstate.core._errors import InvalidInput
from turnstate.engine._follow import Following
from turnstate.server._http import OWNER, ApiError, cut_stream
from turnstate.server._routes import services_of
from turnstate.server._services import Services
from turnstate.server._sse import TurnStream, logged_frames, slices

ROUTES = web.RouteTableDef()

TURN_ID_HEADER = "X-Turn-Id"
_MAX_ID_DIGITS = 9
_NOTICES = {
    "log_truncated": "This answer outgrew the resumable log: the events after the one you "
                     "saw were not kept, the final event follows.",
    "log_expired": "This turn ended longer ago than the log is kept: only its stored "
                   "outcome follows.",
    "not_logged": "This turn's events were not logged (it runs in its caller's own loop): "
                  "the events before the ones that follow are not available; once it has "
                  "ended, only its stored outcome follows.",
}


def resume_point(request: web.Request) -> tuple[str, int]:
    """The last event id the client saw and the field it came in: ``Last-Event-ID``,
    else ``?after=``, else 0. Two ``Last-Event-ID`` headers name no one id: a 400."""
    given = request.headers.getall("Last-Event-ID", [])
    if len(given) > 1:
        raise ApiError(400, "invalid_event_id", "send one Last-Event-ID header, the last "
                       "event id seen", field="Last-Event-ID")
    header = given[0] if given else None
    field, text = ("Last-Event-ID", header) if header is not None else \
        ("after", request.query.get("after", "0"))
    text = text.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= _MAX_ID_DIGITS):
        raise ApiError(400, "invalid_event_id",
                       f"{field} must be a whole number from 0 (the last event id seen)",
                       field=field)
    return field, int(text)


@ROUTES.get("/api/chats/{chat_id}/turns/{turn_id}/events", allow_head=False)  # a stream
async def get_events(request: web.Request) -> web.StreamResponse:
    services = services_of(request)
    field, after = resume_point(request)
    chat_id, turn_id = request.match_info["chat_id"], request.match_info["turn_id"]
    with services.limits.stream(request[OWNER]):
        try:
            following = await services.engine.follow(chat_id, turn_id, after=after,
                                                     owner=request[OWNER])
        except InvalidInput as exc:  # an id beyond the turn's last event
            raise ApiError(400, "invalid_event_id", exc.problem, field=field) from None
        return await stream(request, services, following, turn_id=turn_id,
                            headers_first=True)


@ROUTES.post("/api/chats/{chat_id}/turns/{turn_id}/stop")
async def post_stop(request: web.Request) -> web.Response:
    services = services_of(request)
    chat_id, turn_id = request.match_info["chat_id"], request.match_info["turn_id"]
    await services.engine.stop(turn_id, owner=request[OWNER], chat_id=chat_id)
    return web.json_response({"turnId": turn_id, "status": "stopping"}, status=202)


async def stream(request: web.Request, services: Services, following: Following, *,
                 turn_id: str, cancel_on_leave: bool = False,
                 headers_first: bool = False,
                 headers: dict[str, str] | None = None) -> web.StreamResponse:
    """Send ``following`` as SSE (a notice first when earlier events are gone), a batch
    per write; the final event ends the body. A client that leaves only stops its
    stream, unless ``cancel_on_leave`` (then the turn ends ``cancelled``).

    The headers go out with the first batch, unless ``headers_first`` (a resume: at the
    tail of a waiting turn its first batch may be a tool run or a heartbeat away, and the
    client would wait that long for an answer at all). ``headers``: more to send."""
    sent = {TURN_ID_HEADER: turn_id} if headers is None else {TURN_ID_HEADER: turn_id,
                                                               **headers}
    async with turn_stream(request, services, sent, turn_id=turn_id,
                           cancel_on_leave=cancel_on_leave) as sse:
        if headers_first:
            await sse.send(b"")  # the headers alone (aiohttp sends no empty chunk)
        await _send(sse, following)
    return sse


@contextlib.asynccontextmanager
async def turn_stream(request: web.Request, services: Services, headers: dict[str, str], *,
                      turn_id: str, cancel_on_leave: bool) -> AsyncIterator[TurnStream]:
    """A turn's opened ``TurnStream`` (pings while idle, a send timeout for a reader that
    stalls), its task counted among the server's streams while it lasts. A client that
    leaves (cancelled while the stream waited, or a write that finds it gone) stops only
    its stream, unless ``cancel_on_leave``; a failure after the headers cuts the stream
    (``cut_stream``: logged, the connection closed mid-body) instead of answering again."""
    task = asyncio.current_task()
    assert task is not None
    services.turn_tasks.add(task)  # also what the open-streams gauge counts
    sse = TurnStream(request, headers=headers,
                     heartbeat_seconds=services.config.heartbeat_seconds,
                     first_pings=services.first_pings)
    try:
        await sse.open()
        yield sse
    except asyncio.CancelledError:  # the client left while the stream waited
        if cancel_on_leave and not services.stopping:
            services.engine.detached.cancel(turn_id)
        raise
    except Exception as exc:  # after the headers: the stream is cut, never answered again
        if not sse.prepared:
            raise
        if isinstance(exc, ConnectionError) and cancel_on_leave and not services.stopping:
            services.engine.detached.cancel(turn_id)  # the client left under a write
        cut_stream(request, exc)
    finally:
        sse.close()
        services.turn_tasks.discard(task)


async def _send(sse: TurnStream, following: Following) -> None:
    """The batches run to their end, the final event's batch included: left suspended
    after it, the generator would be finalized by the loop's hook (a wake-up of the
    loop's self-pipe and a task to close it, per turn)."""
    notice, finished = b"", False
    if following.notice is not None:
        data = json.dumps({"type": "resume_notice", "reason": following.notice,
                           "message": _NOTICES[following.notice]})
        notice = f"event: resume_notice\ndata: {data}\n\n".encode()
    async for batch in following.batches:
        if finished:  # nothing follows the final event; a stray batch is not sent
            continue
        for piece in slices(batch):  # a long batch in bounded writes
            frames = notice + logged_frames(piece)
            notice = b""
            if piece[-1].final:
                await sse.finish(frames)
                finished = True
            else:
                await sse.send(frames)
    if not finished:
        await sse.finish(notice)
