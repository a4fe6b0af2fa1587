"""A loopback TCP proxy a test controls: a database outage without touching the database.

``TcpProxy`` listens on a free loopback port and forwards every connection to
``upstream``. A test switches it between:

- ``flow()``: forward both ways (the normal state);
- ``pause()``: hold the bytes (both ways) until ``flow()``: a server that stops
  answering for a while and then carries on, nothing lost;
- ``black_hole()``: accept connections but drop every byte both ways (a peer whose
  packets vanish: no error, no answer);
- ``refuse()``: stop listening (a new connection is refused) until ``flow()``;
- ``deaf()``: forward what clients send, drop every answer (a request that lands and
  whose reply is lost);
- ``silence_open()``: drop every byte of the connections open now, both ways, while new
  ones flow (a middlebox that forgot its connections: the pool's are dead, a new one
  works);
- ``cut()``: reset every open connection at once.

``attempted`` is set when a client sent bytes that were held or dropped: the test's
event that the code under test did try to reach the database during the outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.attempted = asyncio.Event()
        self.accepted = 0
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._drop = False
        self._deaf = False
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()
        self._silenced: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def host_port(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        self._server = await asyncio.start_server(self._accept, sock=sock)

    async def close(self) -> None:
        await self._stop_listening()
        self.cut()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- the switches ------------------------------------------------------------------

    async def flow(self) -> None:
        """Forward again (listening again if refused; held bytes go on)."""
        self._drop = self._deaf = False
        self.attempted.clear()
        if self._server is None:
            await self.start()
        self._flowing.set()

    def pause(self) -> None:
        self.attempted.clear()
        self._flowing.clear()

    def black_hole(self) -> None:
        self.attempted.clear()
        self._drop = True
        self._flowing.set()

    def silence_open(self) -> None:
        self.attempted.clear()
        self._silenced |= self._links

    def deaf(self) -> None:
        self._deaf = True

    async def refuse(self) -> None:
        self.attempted.clear()
        await self._stop_listening()

    def cut(self) -> None:
        for writer in list(self._links):
            with contextlib.suppress(Exception):
                writer.transport.abort()
        self._links.clear()

    # -- the forwarding ----------------------------------------------------------------

    async def _stop_listening(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self._links.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            return
        self._links.add(up_writer)
        for source, sink, client in ((reader, up_writer, True), (up_reader, writer, False)):
            task = asyncio.ensure_future(self._pipe(source, sink, client))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter,
                    client: bool) -> None:
        try:
            while data := await source.read(65536):
                if self._deaf and not client:
                    continue
                if sink in self._silenced:
                    if client:
                        self.attempted.set()
                    continue
                if self._drop or not self._flowing.is_set():
                    if client:
                        self.attempted.set()
                    if self._drop:
                        continue
                    await self._flowing.wait()
                    if self._drop:
                        continue
                sink.write(data)
                await sink.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            with contextlib.suppress(Exception):
                sink.transport.abort()
            self._links.discard(sink)


@contextlib.asynccontextmanager
async def proxied(host: str, port: int) -> AsyncIterator[TcpProxy]:
    proxy = TcpProxy(host, port)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()


def proxied_dsn(dsn: str, proxy: TcpProxy) -> str:
    """``dsn`` with its host and port replaced by the proxy's (user and options kept)."""
    parts = urlsplit(dsn)
    user = parts.netloc.rpartition("@")[0]
    netloc = f"{user}@{proxy.host_port}" if user else proxy.host_port
    return urlunsplit(parts._replace(netloc=netloc))


def upstream_of(dsn: str) -> tuple[str, int]:
    """The host and port a proxy in front of ``dsn``'s server forwards to."""
    parts = urlsplit(dsn)
    return parts.hostname or "127.0.0.1", parts.port or 5432
