"""A light HTTP/1.1 client for :mod:`benchmarks.server`'s 64 sessions: h11 on Trio sockets.

The benchmark's client stands for 64 browsers, which in use run on other machines; here
it shares the server's two cores. ``httpx`` costs it about 2 ms of CPU per approved call
(its client, pool and transport layers around each request, and each streamed chunk),
which the kernel takes from the server's loop. This client does the same exchanges on
the same sockets (keep-alive connections, one per session for its requests and one for
its stream, ``Content-Length`` bodies, chunked responses decoded by h11) without those
layers, so the figures say more about the server and less about the client.

:class:`Client` has the little of ``httpx.AsyncClient`` the benchmark uses: ``post``
(JSON in, :class:`Reply` out) and ``stream`` (a GET whose body is read as it comes).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any, final
from urllib.parse import urlsplit

import h11
import trio

_READ_SIZE = 65536


@final
class Reply:
    """A whole response: what ``httpx.Response`` gives that the benchmark reads."""

    def __init__(self, status_code: int, content: bytes) -> None:
        self.status_code = status_code
        self.content = content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


@final
class _Connection:
    """One kept-alive TCP stream and h11's state of it."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.state = h11.Connection(h11.CLIENT)

    async def send(self, *events: h11.Event) -> None:
        data = b"".join(self.state.send(event) or b"" for event in events)
        await self.stream.send_all(data)

    async def next_event(self) -> h11.Event:
        while True:
            event = self.state.next_event()
            if isinstance(event, h11.Event):
                return event
            if event is h11.PAUSED:  # a response before the request's end: not here
                raise h11.RemoteProtocolError("the server answered mid-request")
            self.state.receive_data(await self.stream.receive_some(_READ_SIZE))


@final
class Client:
    """Requests to one server, with its headers; an async context manager."""

    def __init__(self, base_url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"not a plain http:// URL: {base_url!r}")
        self._address = (parts.hostname, parts.port or 80)
        self._headers = [("Host", parts.netloc), *headers.items()]
        self._idle: _Connection | None = None  # the one kept for requests
        self._open: set[_Connection] = set()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        with trio.CancelScope(shield=True):
            for connection in list(self._open):
                await connection.stream.aclose()
        self._open.clear()

    async def _connect(self) -> _Connection:
        connection = _Connection(await trio.open_tcp_stream(*self._address))
        self._open.add(connection)
        return connection

    async def post(self, path: str, *, json: Any) -> Reply:
        """POST ``json`` to ``path`` on the kept connection; the whole response."""
        body = _dumps(json)
        connection, self._idle = self._idle, None
        if connection is None or connection.state.our_state is not h11.IDLE:
            connection = await self._connect()
        headers = [
            *self._headers,
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
        ]
        await connection.send(
            h11.Request(method="POST", target=path, headers=headers),
            h11.Data(data=body),
            h11.EndOfMessage(),
        )
        status, content = 0, bytearray()
        while True:
            event = await connection.next_event()
            if isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                content += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                raise h11.RemoteProtocolError("the server closed the connection mid-response")
        if connection.state.our_state is h11.DONE and connection.state.their_state is h11.DONE:
            connection.state.start_next_cycle()
            self._idle = connection
        else:
            self._open.discard(connection)
            await connection.stream.aclose()
        return Reply(status, bytes(content))

    @contextlib.asynccontextmanager
    async def stream(self, path: str) -> AsyncIterator[AsyncIterator[bytes]]:
        """GET ``path`` on a connection of its own; its body's bytes as they arrive."""
        connection = await self._connect()
        try:
            await connection.send(
                h11.Request(method="GET", target=path, headers=self._headers),
                h11.EndOfMessage(),
            )
            event = await connection.next_event()
            if not isinstance(event, h11.Response) or event.status_code != 200:
                raise h11.RemoteProtocolError(f"the stream was refused: {event!r}")

            async def body() -> AsyncIterator[bytes]:
                while True:
                    event = await connection.next_event()
                    if isinstance(event, h11.Data):
                        yield bytes(event.data)
                    elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                        return

            yield body()
        finally:
            self._open.discard(connection)
            with trio.CancelScope(shield=True):
                await connection.stream.aclose()


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()
