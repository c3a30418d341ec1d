"""The server's HTTP connections: an idle one outlives a client's own keep-alive expiry.

A client that keeps idle connections exactly as long as the server does (httpx and
hypercorn both default to 5 s) reuses one just as the server closes it, and the request
fails with "Server disconnected without sending a response" (seen in
``benchmarks/server.py`` at 64 sessions). The server keeps them longer, so the client
gives them up first.
"""

from __future__ import annotations

import h11
import trio

from penguin.server import RunningServer
from penguin.server._serve import KEEP_ALIVE

from .support import TOKEN

HTTPX_KEEPALIVE_EXPIRY = 5.0
"""httpx's default: how long it keeps an idle connection for reuse."""


async def _get(stream: trio.SocketStream, connection: h11.Connection, host: str) -> int:
    request = h11.Request(
        method="GET",
        target="/api/server",
        headers=[("Host", host), ("Authorization", f"Bearer {TOKEN}")],
    )
    await stream.send_all(connection.send(request) + connection.send(h11.EndOfMessage()))
    status = 0
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(65536)
            assert data, "the server closed the connection instead of answering"
            connection.receive_data(data)
        elif isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.EndOfMessage):
            connection.start_next_cycle()
            return status


async def test_an_idle_connection_outlives_the_clients_keep_alive(server: RunningServer) -> None:
    assert KEEP_ALIVE > 3 * HTTPX_KEEPALIVE_EXPIRY
    stream = await trio.open_tcp_stream(server.host, server.port)
    async with stream:
        connection = h11.Connection(h11.CLIENT)
        host = f"{server.host}:{server.port}"
        assert await _get(stream, connection, host) == 200
        await trio.sleep(HTTPX_KEEPALIVE_EXPIRY + 1)  # idle past what httpx would keep
        assert await _get(stream, connection, host) == 200
