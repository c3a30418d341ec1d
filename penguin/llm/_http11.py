"""A lean HTTP/1.1 exchange for plain ``http://`` model servers (the shared pool's fast path).

A model client's requests are all alike: one ``POST`` with a ``Content-Length`` body
and a streamed answer. httpcore (with h11 under it) spends several times the CPU of
the exchange itself on each one, which decides how many sessions a machine drives
when the model is served on the same network. :class:`PlainPool` does what such a
request needs and nothing more: the request head and body in one write, the response
head parsed here, the body framed by ``Transfer-Encoding: chunked``,
``Content-Length`` or the end of the connection, and the connection kept for the
next request when the body was read to its end and neither side said ``close``.

It speaks httpx's language at its edge: it is called with an ``httpx.Request`` and
returns an ``httpx.Response`` whose stream reads the body; failures are httpx's
exceptions (``ConnectError``/``ConnectTimeout``, ``WriteError``/``WriteTimeout``,
``ReadError``/``ReadTimeout``, ``RemoteProtocolError``), as httpcore would raise them,
so the client's error classification (``_openai``) is the same either way.

A connection taken from the idle list is checked once (expired after
:data:`~._transport.KEEPALIVE_EXPIRY`, or readable: the server closed it or sent
something unasked) — only the one taken, never every idle one. TLS, proxies, HTTP/2,
request bodies without a length and ``Expect: 100-continue`` are not handled here:
:meth:`PlainPool.handles` says no and the request goes to httpcore.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Final, final

import httpx
import trio

__all__ = ["PlainPool"]

_MAX_HEAD: Final = 64 * 1024
"""The most bytes a response head (status line and headers) may take."""
_READ_SIZE: Final = 65536


def _deadline(timeouts: dict[str, float | None], name: str) -> float:
    value = timeouts.get(name)
    return trio.current_time() + value if value is not None else float("inf")


@final
class _Connection:
    def __init__(self, stream: trio.SocketStream, origin: tuple[bytes, bytes, int]) -> None:
        self.stream = stream
        self.origin = origin
        self.buffer = bytearray()
        self.idle_since = 0.0

    async def receive(self, deadline: float) -> bytes:
        """Bytes from the socket (b"" at its end), within ``deadline``."""
        try:
            with trio.fail_at(deadline):
                return await self.stream.receive_some(_READ_SIZE)
        except trio.TooSlowError:
            raise httpx.ReadTimeout("timed out reading the response") from None
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__) from None

    async def close(self) -> None:
        await trio.aclose_forcefully(self.stream)


@final
class PlainPool:
    """Idle plain-HTTP connections by origin, and the exchange on them."""

    def __init__(self, keepalive_expiry: float) -> None:
        self._idle: dict[tuple[bytes, bytes, int], list[_Connection]] = {}
        self._keepalive_expiry = keepalive_expiry

    @staticmethod
    def handles(request: httpx.Request) -> bool:
        """Whether the request is one this pool sends (else httpcore does)."""
        headers = request.headers
        return (
            request.url.scheme == "http"
            and "transfer-encoding" not in headers
            and "expect" not in headers
            and isinstance(request.stream, httpx.ByteStream)
        )

    async def send(self, request: httpx.Request) -> httpx.Response:
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        body = await request.aread()
        url = request.url
        origin = (url.raw_scheme, url.raw_host, url.port or 80)
        head = [b"%s %s HTTP/1.1\r\n" % (request.method.encode(), url.raw_path)]
        for name, value in request.headers.raw:
            head.append(b"%s: %s\r\n" % (name, value))
        head.append(b"\r\n")
        data = b"".join(head) + body
        connection = await self._connection(origin, timeouts)
        try:
            try:
                with trio.fail_at(_deadline(timeouts, "write")):
                    await connection.stream.send_all(data)
            except trio.TooSlowError:
                raise httpx.WriteTimeout("timed out sending the request") from None
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise httpx.WriteError(str(exc) or type(exc).__name__) from None
            status, reason, headers, version = await _read_head(connection, timeouts)
        except BaseException:
            await connection.close()
            raise
        framing = _Framing.of(request.method, status, headers, version)
        stream = _Body(self, connection, framing, timeouts)
        return httpx.Response(
            status,
            headers=headers,
            stream=stream,
            extensions={"http_version": version, "reason_phrase": reason},
        )

    async def _connection(
        self, origin: tuple[bytes, bytes, int], timeouts: dict[str, float | None]
    ) -> _Connection:
        idle = self._idle.get(origin)
        now = trio.current_time()
        while idle:
            connection = idle.pop()
            if (
                now - connection.idle_since <= self._keepalive_expiry
                and not connection.stream.socket.is_readable()
            ):
                return connection
            await connection.close()  # expired, or closed (or spoken on) by the server
        host = origin[1].decode("ascii")
        try:
            with trio.fail_at(_deadline(timeouts, "connect")):
                stream = await trio.open_tcp_stream(host, origin[2])
        except trio.TooSlowError:
            raise httpx.ConnectTimeout(f"timed out connecting to {host}:{origin[2]}") from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from None
        return _Connection(stream, origin)

    async def release(self, connection: _Connection, reusable: bool) -> None:
        if reusable and not connection.buffer:
            connection.idle_since = trio.current_time()
            self._idle.setdefault(connection.origin, []).append(connection)
        else:
            await connection.close()

    async def aclose(self) -> None:
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                await connection.close()


async def _read_head(
    connection: _Connection, timeouts: dict[str, float | None]
) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes]:
    """The first final response's status, reason, headers and version (1xx skipped)."""
    deadline = _deadline(timeouts, "read")
    buffer = connection.buffer
    while True:
        end = buffer.find(b"\r\n\r\n")
        while end < 0:
            if len(buffer) > _MAX_HEAD:
                raise httpx.RemoteProtocolError("the response head is too large")
            chunk = await connection.receive(deadline)
            if not chunk:
                raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
            buffer += chunk
            end = buffer.find(b"\r\n\r\n", max(0, len(buffer) - len(chunk) - 3))
        lines = bytes(buffer[:end]).split(b"\r\n")
        del buffer[: end + 4]
        parts = lines[0].split(b" ", 2)
        try:
            version, status = parts[0], int(parts[1])
        except (IndexError, ValueError):
            raise httpx.RemoteProtocolError(f"malformed status line {lines[0][:100]!r}") from None
        if not version.startswith(b"HTTP/1.") or not 100 <= status <= 999:
            raise httpx.RemoteProtocolError(f"malformed status line {lines[0][:100]!r}")
        headers = []
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or not name or name != name.strip():
                raise httpx.RemoteProtocolError(f"malformed header line {line[:100]!r}")
            headers.append((name, value.strip(b" \t")))
        if 100 <= status < 200 and status != 101:
            continue  # an interim response: the final one follows
        reason = parts[2] if len(parts) > 2 else b""
        return status, reason, headers, version


@final
class _Framing:
    """How the body ends: chunked, after ``length`` bytes, at the connection's end, or empty."""

    def __init__(self, kind: str, length: int, keep: bool) -> None:
        self.kind = kind
        self.length = length
        self.keep = keep

    @classmethod
    def of(
        cls, method: str, status: int, headers: list[tuple[bytes, bytes]], version: bytes
    ) -> _Framing:
        connection = b""
        chunked = False
        length: int | None = None
        for name, value in headers:
            lower = name.lower()
            if lower == b"connection":
                connection += value.lower()
            elif lower == b"transfer-encoding":
                chunked = chunked or b"chunked" in value.lower()
            elif lower == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    raise httpx.RemoteProtocolError(f"bad Content-Length {value[:40]!r}") from None
        keep = version == b"HTTP/1.1" and b"close" not in connection
        if method == "HEAD" or status in (204, 304):
            return cls("empty", 0, keep)
        if chunked:
            return cls("chunked", 0, keep)
        if length is not None:
            return cls("length", length, keep)
        return cls("close", 0, False)


@final
class _Body(httpx.AsyncByteStream):
    """A response body read off its connection; the connection goes back when it ends."""

    def __init__(
        self,
        pool: PlainPool,
        connection: _Connection,
        framing: _Framing,
        timeouts: dict[str, float | None],
    ) -> None:
        self._pool = pool
        self._connection: _Connection | None = connection
        self._framing = framing
        self._read_timeout = timeouts.get("read")
        self._complete = framing.kind == "empty"

    async def _more(self, connection: _Connection) -> bytes:
        timeout = self._read_timeout
        deadline = trio.current_time() + timeout if timeout is not None else float("inf")
        return await connection.receive(deadline)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None or self._complete:
            return
        kind = self._framing.kind
        buffer = connection.buffer
        if kind == "length":
            left = self._framing.length
            while left > 0:
                if not buffer:
                    chunk = await self._more(connection)
                    if not chunk:
                        raise httpx.RemoteProtocolError(
                            "peer closed connection without sending complete message body"
                        )
                    buffer += chunk
                piece = bytes(buffer[:left])
                del buffer[:left]
                left -= len(piece)
                yield piece
        elif kind == "close":
            if buffer:
                piece = bytes(buffer)
                buffer.clear()
                yield piece
            while chunk := await self._more(connection):
                yield chunk
        else:
            async for piece in self._chunked(connection, buffer):
                yield piece
        self._complete = True
        if self._connection is not None:
            self._connection = None
            await self._pool.release(connection, self._framing.keep)

    async def _line(self, connection: _Connection, buffer: bytearray) -> bytes:
        while (end := buffer.find(b"\r\n")) < 0:
            if len(buffer) > _MAX_HEAD:
                raise httpx.RemoteProtocolError("a chunk header is too long")
            chunk = await self._more(connection)
            if not chunk:
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body"
                )
            buffer += chunk
        line = bytes(buffer[:end])
        del buffer[: end + 2]
        return line

    async def _chunked(self, connection: _Connection, buffer: bytearray) -> AsyncIterator[bytes]:
        while True:
            line = await self._line(connection, buffer)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise httpx.RemoteProtocolError(f"bad chunk size {line[:40]!r}") from None
            if size == 0:
                while await self._line(connection, buffer):
                    pass  # trailers, up to the empty line
                return
            left = size
            while left > 0:
                if not buffer:
                    chunk = await self._more(connection)
                    if not chunk:
                        raise httpx.RemoteProtocolError(
                            "peer closed connection without sending complete message body"
                        )
                    buffer += chunk
                piece = bytes(buffer[:left])
                del buffer[:left]
                left -= len(piece)
                yield piece
            if await self._line(connection, buffer):
                raise httpx.RemoteProtocolError("a chunk does not end with CRLF")

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:  # not read to its end: the connection cannot be reused
            await self._pool.release(connection, self._complete and self._framing.keep)
