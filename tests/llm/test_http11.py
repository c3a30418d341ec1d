"""Issue 20.1b: the shared pool's plain-HTTP exchange, against a raw server on 127.0.0.1.

Each case's server answers every request on a connection with the same canned bytes
and counts the connections it accepted, so framing and reuse show from outside.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import httpx
import pytest
import trio

from penguin.llm._transport import ClientTransport


@asynccontextmanager
async def _server(
    answer: bytes, *, close_after: bool = False, closed: trio.Event | None = None
) -> AsyncIterator[list[int]]:
    """A server that answers each request with ``answer``; yields [port, connections].

    ``closed`` is set once the server has closed a connection.
    """
    state = [0, 0]

    async def handle(stream: trio.SocketStream) -> None:
        state[1] += 1
        try:
            await serve(stream)
        finally:
            if closed is not None:
                closed.set()

    async def serve(stream: trio.SocketStream) -> None:
        buffer = b""
        async with stream:
            while True:
                while b"\r\n\r\n" not in buffer:
                    chunk = await stream.receive_some(65536)
                    if not chunk:
                        return
                    buffer += chunk
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.lower() == b"content-length":
                        length = int(value)
                while len(buffer) < length:
                    buffer += await stream.receive_some(65536)
                buffer = buffer[length:]
                await stream.send_all(answer)
                if close_after:
                    return

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        state[0] = listeners[0].socket.getsockname()[1]
        yield state
        nursery.cancel_scope.cancel()


async def _get_twice(port: int, between: trio.Event | None = None) -> list[bytes]:
    bodies = []
    async with httpx.AsyncClient(transport=ClientTransport()) as client:
        for number in range(2):
            if number == 1 and between is not None:
                await between.wait()
            async with client.stream(
                "POST", f"http://127.0.0.1:{port}/v1/x", content=b"{}"
            ) as response:
                assert response.status_code == 200
                bodies.append(b"".join([chunk async for chunk in response.aiter_bytes()]))
    return bodies


async def test_20_1_b_chunked_bodies_are_joined_and_the_connection_is_reused() -> None:
    answer = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    async with _server(answer) as state:
        assert await _get_twice(state[0]) == [b"hello world"] * 2
        assert state[1] == 1


async def test_20_1_b_a_content_length_body_and_an_interim_response() -> None:
    answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"
    async with _server(answer) as state:
        assert await _get_twice(state[0]) == [b"abc"] * 2
        assert state[1] == 1


async def test_20_1_b_a_body_to_the_end_of_the_connection_takes_a_new_one_next() -> None:
    answer = b"HTTP/1.1 200 OK\r\n\r\nuntil close"
    async with _server(answer, close_after=True) as state:
        assert await _get_twice(state[0]) == [b"until close"] * 2
        assert state[1] == 2


async def test_20_1_b_a_connection_the_server_closed_while_idle_is_not_used() -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    closed = trio.Event()
    async with _server(answer, close_after=True, closed=closed) as state:
        # The server closes after answering although it did not say so: the idle
        # connection is found closed when it is taken, and a new one is opened.
        assert await _get_twice(state[0], between=closed) == [b"ok"] * 2
        assert state[1] == 2


async def test_20_1_b_a_body_cut_short_is_a_protocol_error() -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"
    async with _server(answer, close_after=True) as state:
        with pytest.raises(httpx.RemoteProtocolError):
            await _get_twice(state[0])


async def test_20_1_b_a_malformed_status_line_is_a_protocol_error() -> None:
    async with _server(b"SPDY/9 what\r\n\r\n", close_after=True) as state:
        with pytest.raises(httpx.RemoteProtocolError):
            await _get_twice(state[0])
