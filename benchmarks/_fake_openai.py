"""A small fake OpenAI server for the peer benchmark (not turnstate's emulator).

It answers ``POST /v1/responses`` (JSON or SSE) and ``POST /v1/chat/completions``
(SSE) with one fixed short answer, in the wire shapes of the real API, so the raw
``openai`` client, the OpenAI Agents SDK and turnstate all parse it. It keeps the ids of
the responses it issued, so ``previous_response_id`` must name one (else the real 404
``previous_response_not_found``), and nothing else: neither side gets a home
advantage, and every client costs the server the same. ``GET /stats`` reports the
requests and request-body bytes received since the last ``POST /stats/reset``.

Run as ``python benchmarks/_fake_openai.py``: it prints ``PORT <n>`` and serves until
its standard input closes (the benchmark starts it as a child process, so its CPU time
never mixes with the clients' measured time).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from collections.abc import Iterator
from typing import Any

from aiohttp import web

ANSWER = ("Sure. Here is a short answer of a few sentences, the kind a chat turn usually "
          "gets back: it names the point, adds one detail, and stops there.")
PIECES = 6


def _split(text: str, parts: int) -> list[str]:
    size = -(-len(text) // parts)
    return [text[i:i + size] for i in range(0, len(text), size)]


class FakeOpenAI:
    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.issued: set[str] = set()
        self.requests = 0
        self.bytes = 0
        self.input_tokens = 0
        self.templates = Templates()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/responses", self.responses)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/stats", self.stats)
        app.router.add_post("/stats/reset", self.reset)
        return app

    async def stats(self, _: web.Request) -> web.Response:
        return web.json_response({"requests": self.requests, "bytes": self.bytes})

    async def reset(self, _: web.Request) -> web.Response:
        self.requests = self.bytes = 0
        return web.json_response({})

    async def _body(self, request: web.Request) -> dict[str, Any]:
        raw = await request.read()
        self.requests += 1
        self.bytes += len(raw)
        self.input_tokens = len(raw) // 4 + 20
        body: dict[str, Any] = json.loads(raw)
        return body

    # -- Responses ------------------------------------------------------------------

    async def responses(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        previous = body.get("previous_response_id")
        if previous is not None and previous not in self.issued:
            error = {"message": f"Previous response with id '{previous}' not found.",
                     "type": "invalid_request_error", "param": "previous_response_id",
                     "code": "previous_response_not_found"}
            return web.json_response({"error": error}, status=404)
        number = next(self.ids)
        rid = f"resp_{number:024x}"
        self.issued.add(rid)
        stream = bool(body.get("stream"))
        template = self.templates.response(body, stream=stream)
        data = template.fill(number, previous, self.input_tokens)
        if not stream:
            return web.Response(body=data, content_type="application/json")
        return await _stream(request, data)

    # -- Chat Completions -------------------------------------------------------------

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        template = self.templates.chat(body)
        return await _stream(request, template.fill(next(self.ids), None, self.input_tokens))


async def _stream(request: web.Request, data: bytes) -> web.StreamResponse:
    reply = web.StreamResponse(headers={"content-type": "text/event-stream"})
    await reply.prepare(request)
    await reply.write(data)
    await reply.write_eof()
    return reply


RID, MID, PREVIOUS, TOKENS, TOTAL = "RID@@", "MID@@", "PREV@@", 1_000_001, 1_000_031
"""Placeholders in a cached reply: the ids, ``previous_response_id`` (a JSON value) and
the input and total token counts (numbers no real count reaches)."""


class Template:
    """One reply's bytes with placeholders, filled per request by a few replaces: every
    reply costs the server about the same, streamed or not (the JSON encoding of a
    reply's objects is done once per shape, not per request)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def fill(self, number: int, previous: str | None, tokens: int) -> bytes:
        prev = b"null" if previous is None else json.dumps(previous).encode()
        return (self.data.replace(f"chatcmpl-{RID}".encode(), f"chatcmpl-{number:024x}".encode())
                .replace(RID.encode(), f"resp_{number:024x}".encode())
                .replace(MID.encode(), f"msg_{number:024x}".encode())
                .replace(f'"{PREVIOUS}"'.encode(), prev)
                .replace(str(TOTAL).encode(), str(tokens + 30).encode())
                .replace(str(TOKENS).encode(), str(tokens).encode()))


class Templates:
    """Cached replies by what shapes them (instructions, model, stream options)."""

    def __init__(self) -> None:
        self.cache: dict[tuple[Any, ...], Template] = {}

    def response(self, body: dict[str, Any], *, stream: bool) -> Template:
        key = ("responses", stream, body.get("instructions"), body.get("model", "gpt-4o"))
        found = self.cache.get(key)
        if found is None:
            shape = {**body, "previous_response_id": PREVIOUS}
            if stream:
                events = _response_events(shape, RID, MID, TOKENS)
                data = b"".join(_sse(e) for e in events)
            else:
                data = json.dumps(_response(shape, RID, MID, TOKENS, completed=True)).encode()
            found = self.cache[key] = Template(data)
        return found

    def chat(self, body: dict[str, Any]) -> Template:
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        key = ("chat", usage, body.get("model", "gpt-4o"))
        found = self.cache.get(key)
        if found is None:
            chunks = _chat_chunks(body, f"chatcmpl-{RID}", TOKENS)
            found = self.cache[key] = Template(b"".join(chunks) + b"data: [DONE]\n\n")
        return found


def _message(mid: str, text: str, status: str) -> dict[str, Any]:
    content = [{"type": "output_text", "annotations": [], "logprobs": [], "text": text}]
    return {"id": mid, "type": "message", "status": status, "role": "assistant",
            "content": content if text or status == "completed" else []}


def _response(body: dict[str, Any], rid: str, mid: str, tokens: int, *,
              completed: bool) -> dict[str, Any]:
    return {
        "id": rid, "object": "response", "created_at": 1770000000,
        "status": "completed" if completed else "in_progress", "error": None,
        "incomplete_details": None, "instructions": body.get("instructions"),
        "model": body.get("model", "gpt-4o"), "parallel_tool_calls": True,
        "previous_response_id": body.get("previous_response_id"), "store": True,
        "temperature": 1.0, "tool_choice": "auto", "tools": [], "top_p": 1.0,
        "truncation": "disabled", "metadata": {},
        "output": [_message(mid, ANSWER, "completed")] if completed else [],
        "usage": {"input_tokens": tokens, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": tokens + 30} if completed else None,
    }


def _response_events(body: dict[str, Any], rid: str, mid: str,
                     tokens: int) -> Iterator[dict[str, Any]]:
    seq = itertools.count()
    head = _response(body, rid, mid, tokens, completed=False)
    yield {"type": "response.created", "sequence_number": next(seq), "response": head}
    yield {"type": "response.in_progress", "sequence_number": next(seq), "response": head}
    yield {"type": "response.output_item.added", "sequence_number": next(seq),
           "output_index": 0, "item": _message(mid, "", "in_progress")}
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    where = {"item_id": mid, "output_index": 0, "content_index": 0}
    yield {"type": "response.content_part.added", "sequence_number": next(seq), **where,
           "part": part}
    for piece in _split(ANSWER, PIECES):
        yield {"type": "response.output_text.delta", "sequence_number": next(seq), **where,
               "delta": piece, "logprobs": []}
    yield {"type": "response.output_text.done", "sequence_number": next(seq), **where,
           "text": ANSWER, "logprobs": []}
    yield {"type": "response.content_part.done", "sequence_number": next(seq), **where,
           "part": {**part, "text": ANSWER}}
    yield {"type": "response.output_item.done", "sequence_number": next(seq),
           "output_index": 0, "item": _message(mid, ANSWER, "completed")}
    yield {"type": "response.completed", "sequence_number": next(seq),
           "response": _response(body, rid, mid, tokens, completed=True)}


def _sse(event: dict[str, Any]) -> bytes:
    data = json.dumps(event, separators=(",", ":"))
    return f"event: {event['type']}\ndata: {data}\n\n".encode()


def _chat_chunks(body: dict[str, Any], cid: str, prompt: int) -> Iterator[bytes]:
    base = {"id": cid, "object": "chat.completion.chunk", "created": 1770000000,
            "model": body.get("model", "gpt-4o")}
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": piece} for piece in _split(ANSWER, PIECES)]
    for delta in deltas:
        choice = {"index": 0, "delta": delta, "finish_reason": None}
        yield _data({**base, "choices": [choice]})
    yield _data({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = {"prompt_tokens": prompt, "completion_tokens": 30,
                 "total_tokens": prompt + 30}
        yield _data({**base, "choices": [], "usage": usage})


def _data(chunk: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


async def serve() -> None:
    runner = web.AppRunner(FakeOpenAI().app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    print(f"PORT {port}", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes our stdin
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(serve())
