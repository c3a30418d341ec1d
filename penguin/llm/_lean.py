"""The lean exchange: model requests to a plain ``http://`` server, pooled per run.

What this module owns:

- **When it is used** (:func:`lean_origin`): a base URL whose scheme is ``http`` and no
  proxy in the environment. Every other server (``https://``, proxies, Unix sockets)
  keeps httpx's client and the shared pool of :mod:`._transport`.
- **The exchange** (:meth:`LeanLease.post`): on a Trio TCP stream, the request as h11
  writes it (h11 writes and checks its head once per path; each request is that head,
  its Content-Length and the body), the response read by a small reader of its own
  while it is plain, by h11 as soon as it is not. A model client sends thousands of
  small streamed requests; httpx's client, transport and pool layers cost ~0.55 ms of
  CPU per request of the ~0.15 ms the HTTP itself takes (``benchmarks/model_exchange.py``),
  and then h11's per-event work was still ~7 % of penguin's CPU in a batch. Plain is a
  well-formed ``HTTP/1.1`` head in strict grammar (CRLF lines, no folding, no 1xx,
  204 or 304) with exactly one of ``Transfer-Encoding: chunked`` and one
  ``Content-Length``, and a chunked body without extensions or trailers: what model
  servers send. At the first byte that is not (a bare LF, an extension, a trailer, a
  bad footer, the stream's end too early) the reader hands h11 the head and everything
  from there, so h11 reads on, or refuses, exactly as it would have from the start.
  What is here besides is the connection handling httpcore would do: keep-alive
  reuse, expiry, the readability check before a reuse, closing whatever was not read
  to its end (or said ``Connection: close``, or sent more than its answer).
- **The same failures as httpx**: connect, read and write failures and protocol errors
  are raised as the ``httpx`` exceptions httpcore would raise, with its words
  (``Server disconnected without sending a response.``), so the model client's error
  texts are the same on either path.
- **The request's bytes as httpx sends them**: the same headers in the same order
  (``Host``, ``Connection``, ``User-Agent``, the client's, ``Content-Length``).

One pool serves every model client of a Trio run (a lease per client, the last lease
closes the idle connections), like the shared httpx pool.
"""

from __future__ import annotations

import contextlib
import re
import select
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Final, final
from urllib.parse import urlsplit

import attrs
import h11
import httpx
import trio

from ._transport import RunPoolLease, environment_proxies

__all__ = ["LeanLease", "LeanOrigin", "LeanResponse", "lean_origin"]

KEEPALIVE_EXPIRY: Final = 5.0
"""Seconds an idle connection is kept (httpx's default)."""
MAX_IDLE: Final = 1024
"""Idle connections kept per origin at most (those in flight are not counted)."""
_READ_SIZE: Final = 65536
_USER_AGENT: Final = f"python-httpx/{httpx.__version__}"


@final
@attrs.frozen
class LeanOrigin:
    """Where a lean request goes: host, port, and the path of the base URL."""

    host: str
    port: int
    path: str

    @property
    def host_header(self) -> str:
        """The ``Host`` header's value, as httpx writes it (no default port)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == 80 else f"{host}:{self.port}"


def lean_origin(base_url: str) -> LeanOrigin | None:
    """The origin of ``base_url`` when it takes the lean exchange, else None."""
    if environment_proxies(("http", "all")):
        return None
    try:
        parts = urlsplit(base_url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme != "http" or not parts.hostname or parts.query or parts.fragment:
        return None
    if parts.username is not None or parts.password is not None:
        return None
    if not all(33 <= ord(c) < 127 and c != "%" for c in parts.path):
        return None  # a path httpx would have to quote or normalise
    return LeanOrigin(parts.hostname, port or 80, parts.path)


@final
class _Connection:
    """One kept-alive TCP stream and what was received on it but not consumed yet."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.idle_since = 0.0

    def close(self) -> None:
        self.stream.socket.close()

    def reusable(self, now: float) -> bool:
        """Not expired, and the server has not closed it (nothing to read while idle)."""
        if now - self.idle_since > KEEPALIVE_EXPIRY:
            return False
        poll = select.poll()  # not select(): a batch may hold more than 1,024 fds
        try:
            poll.register(self.stream.socket.fileno(), select.POLLIN)
            return not poll.poll(0)
        except (OSError, ValueError):
            return False

    async def receive(self, read_timeout: float) -> bytes:
        """The next bytes from the server (b"" at its end), with httpcore's failures."""
        with trio.CancelScope(deadline=trio.current_time() + read_timeout) as scope:
            try:
                return await self.stream.receive_some(_READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
                raise httpx.ReadError(str(error)) from error
        assert scope.cancelled_caught
        raise httpx.ReadTimeout("")


@final
class _Pool:
    """The idle connections of one Trio run, per origin, and the leases that hold it."""

    def __init__(self) -> None:
        self.idle: dict[tuple[str, int], list[_Connection]] = {}
        self.leases = 0
        self.closed = False

    def take(self, key: tuple[str, int]) -> _Connection | None:
        idle = self.idle.get(key)
        now = time.monotonic()
        while idle:
            connection = idle.pop()  # the newest: the least likely to have expired
            if connection.reusable(now):
                return connection
            connection.close()
        return None

    def give_back(self, key: tuple[str, int], connection: _Connection) -> None:
        if self.closed:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        idle = self.idle.setdefault(key, [])
        idle.append(connection)
        while len(idle) > MAX_IDLE or (
            idle and connection.idle_since - idle[0].idle_since > KEEPALIVE_EXPIRY
        ):
            idle.pop(0).close()

    def close(self) -> None:
        self.closed = True
        idle, self.idle = self.idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()


_POOL: Final = trio.lowlevel.RunVar[_Pool | None]("penguin_llm_lean_pool", default=None)


# ---------------------------------------------------------------------------- the head


_STATUS_LINE: Final = re.compile(rb"HTTP/1\.1 ([2-5][0-9][0-9])(?: ([\x20-\x7e\t]*))?")
_HEADER_LINE: Final = re.compile(
    rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*((?:[\x21-\x7e]+(?:[ \t]+[\x21-\x7e]+)*)?)[ \t]*"
)
_CHUNK_HEADER: Final = re.compile(rb"[0-9A-Fa-f]{1,16}\r\n")
_BLANK_LINE: Final = re.compile(rb"\n\r?\n")
"""Where h11 ends a head (with no CRLF CRLF in the buffer, a blank line of bare LFs)."""
_MAX_INCOMPLETE: Final = 100 * 1024
"""The most of a head (or chunk header) not yet complete that is kept: httpcore's limit."""


@final
@attrs.frozen
class _Head:
    """A response head the lean reader takes as it is (anything else goes to h11)."""

    raw: bytes
    status_code: int
    reason: bytes
    headers: dict[str, str]
    chunked: bool
    length: int  # the Content-Length of a body that is not chunked
    keep_alive: bool


def _add_header(headers: dict[str, str], name: str, value: str) -> None:
    """Add one field; a repeated one is joined with ``", "``, as httpx's ``Headers`` reads it.

    Both heads, the lean reader's and h11's, go through here, so they agree.
    """
    headers[name] = f"{headers[name]}, {value}" if name in headers else value


def _parse_head(raw: bytes) -> _Head | None:
    """``raw`` (up to its blank line) when it is plainly a well-formed HTTP/1.1 answer.

    None for anything h11 might read otherwise or refuse: another version, a 1xx,
    204 or 304, bare CRs or LFs, a header line outside the strict grammar, framing
    other than exactly one of ``Transfer-Encoding: chunked`` or one ``Content-Length``.
    """
    if raw.count(b"\n") != raw.count(b"\r\n") or raw.count(b"\r") != raw.count(b"\r\n"):
        return None
    status_line, *lines = raw[:-4].split(b"\r\n")
    match = _STATUS_LINE.fullmatch(status_line)
    if match is None:
        return None
    status_code = int(match[1])
    if status_code in (204, 304):
        return None
    headers: dict[str, str] = {}
    framing: list[tuple[str, str]] = []
    keep_alive = True
    for line in lines:
        field = _HEADER_LINE.fullmatch(line)
        if field is None:
            return None
        name = field[1].decode("ascii").lower()
        value = field[2].decode("ascii")
        if name in ("content-length", "transfer-encoding"):
            framing.append((name, value))
        elif name == "connection" and "close" in (t.strip().lower() for t in value.split(",")):
            keep_alive = False
        _add_header(headers, name, value)
    if len(framing) != 1:
        return None
    ((name, value),) = framing
    if name == "transfer-encoding":
        if value.lower() != "chunked":
            return None
        return _Head(raw, status_code, match[2] or b"", headers, True, 0, keep_alive)
    if not value.isdigit() or len(value) > 18:
        return None
    return _Head(raw, status_code, match[2] or b"", headers, False, int(value), keep_alive)


def _h11_after_request() -> h11.Connection:
    """An h11 client that has sent a POST: ready to read a response as h11 reads it."""
    state = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_INCOMPLETE)
    state.send(
        h11.Request(
            method=b"POST", target=b"/", headers=[(b"Host", b"h"), (b"Content-Length", b"0")]
        )
    )
    state.send(h11.EndOfMessage())
    return state


# ---------------------------------------------------------------------------- the body


def _joined_headers(response: h11.Response) -> dict[str, str]:
    """h11's headers as the model client reads them (h11 gives the names in lower case)."""
    headers: dict[str, str] = {}
    for name, value in response.headers:
        _add_header(headers, name.decode("latin-1"), value.decode("latin-1"))
    return headers


@final
class LeanResponse:
    """A response whose body is being read: what the model client asks of httpx's.

    The body is read by a small reader of its own while it is plain (``chunked``
    without extensions or trailers, or a ``Content-Length``); at the first thing it
    does not take (an extension, a trailer, a malformed footer, the end of the stream
    before the body's), the bytes are handed to h11 from there, so h11 says what it
    would have said.
    """

    def __init__(
        self,
        head: _Head | h11.Response,
        connection: _Connection,
        release: _Release,
        read_timeout: float,
        state: h11.Connection | None = None,
    ) -> None:
        self._connection = connection
        self._release = release
        self._read_timeout = read_timeout
        self._state = state  # h11's reader, when it reads the body
        self._drop = 0  # bytes h11 hands back that the lean reader had handed out
        self.status_code = head.status_code
        self.reason_phrase = head.reason.decode("ascii", errors="ignore")
        self._head = head if isinstance(head, _Head) else None
        self.headers: Mapping[str, str] = (
            head.headers if isinstance(head, _Head) else _joined_headers(head)
        )

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive; the connection is kept once it is all read."""
        if self._head is not None:
            reader = self._head_reader()
            async for data in reader:
                yield data
            if self._state is None:  # read to its end by the lean reader
                return
        async for data in self._h11_body():
            yield data

    async def _head_reader(self) -> AsyncIterator[bytes]:
        """The lean reader; it returns early, ``self._state`` set, to hand over to h11."""
        head = self._head
        assert head is not None
        connection = self._connection
        buffer = connection.buffer
        if not head.chunked:
            left = head.length
            while left:
                if not buffer:
                    data = await connection.receive(self._read_timeout)
                    if not data:
                        handed = head.length - left
                        self._hand_over(b"\0" * handed, handed)
                        return
                    buffer += data
                piece = bytes(buffer[:left])
                del buffer[:left]
                left -= len(piece)
                yield piece
            self._finish(head)
            return
        while True:  # at a chunk's header
            end = buffer.find(b"\r\n")
            if end < 0:
                if len(buffer) > _MAX_INCOMPLETE:
                    self._hand_over(b"", 0)
                    return
                data = await connection.receive(self._read_timeout)
                if not data:
                    self._hand_over(b"", 0)
                    return
                buffer += data
                continue
            if _CHUNK_HEADER.fullmatch(buffer, 0, end + 2) is None:
                self._hand_over(b"", 0)  # an extension, spaces, a bad size: h11's call
                return
            size = int(buffer[:end], 16)
            if size == 0:
                if buffer[end + 2 : end + 4] != b"\r\n":  # trailers, or not here yet
                    self._hand_over(b"", 0)
                    return
                del buffer[: end + 4]
                self._finish(head)
                return
            del buffer[: end + 2]
            left = size
            while left:  # the chunk's data, as it arrives
                if not buffer:
                    data = await connection.receive(self._read_timeout)
                    if not data:
                        self._hand_over(f"{left:x}\r\n".encode(), 0)
                        return
                    buffer += data
                piece = bytes(buffer[:left])
                del buffer[:left]
                left -= len(piece)
                yield piece
            while len(buffer) < 2 and buffer == b"\r\n"[: len(buffer)]:
                data = await connection.receive(self._read_timeout)
                if not data:
                    break
                buffer += data
            if buffer[:2] != b"\r\n":
                self._hand_over(b"1\r\n\0", 1)  # h11 is then where the footer is due
                return
            del buffer[:2]

    def _finish(self, head: _Head) -> None:
        """The body was read to its end: keep the connection if the answer allows."""
        reusable = head.keep_alive and not self._connection.buffer
        self._release(self._connection, done=reusable)

    def _hand_over(self, filler: bytes, drop: int) -> None:
        """h11 reads on from here: the head, ``filler`` to put it where the body is, the rest.

        ``filler`` stands for what the lean reader took of the body (its first
        ``drop`` bytes of data are not handed out again).
        """
        assert self._head is not None
        state = _h11_after_request()
        buffer = self._connection.buffer
        state.receive_data(self._head.raw + filler + bytes(buffer))
        buffer.clear()
        self._state = state
        self._drop = drop

    async def _h11_body(self) -> AsyncIterator[bytes]:
        connection = self._connection
        state = self._state
        assert state is not None
        while True:
            event = await _next_event(connection, state, self._read_timeout)
            if isinstance(event, h11.Data):
                data = bytes(event.data)
                if self._drop:
                    cut = min(self._drop, len(data))
                    self._drop -= cut
                    data = data[cut:]
                if data:
                    yield data
            elif isinstance(event, h11.EndOfMessage):
                done = state.our_state is h11.DONE and state.their_state is h11.DONE
                leftover, _ = state.trailing_data
                self._release(connection, done=done and not leftover)
                return
            elif isinstance(event, h11.Response):
                pass  # the head again, when h11 took over in the body
            else:  # pragma: no cover - h11 sends nothing else in a body
                raise httpx.RemoteProtocolError(f"unexpected {type(event).__name__} in a body")

    def aclose(self) -> None:
        """Give the connection back: kept if its exchange ended, closed if not."""
        self._release(self._connection, done=False)


@final
class _Release:
    """Hands a connection back to its pool once: kept when its exchange ended cleanly."""

    def __init__(self, pool: _Pool, key: tuple[str, int]) -> None:
        self._pool = pool
        self._key = key
        self._released = False

    def __call__(self, connection: _Connection, *, done: bool) -> None:
        if self._released:
            return
        self._released = True
        if done:
            self._pool.give_back(self._key, connection)
        else:
            connection.close()


async def _next_event(
    connection: _Connection, state: h11.Connection, read_timeout: float
) -> h11.Event:
    """h11's next event, reading from the stream as it needs (httpcore's words on errors)."""
    while True:
        try:
            event = state.next_event()
        except h11.RemoteProtocolError as error:
            raise httpx.RemoteProtocolError(str(error)) from error
        if event is h11.PAUSED:  # pragma: no cover - only after the response's end
            raise httpx.RemoteProtocolError("the response continued past its end")
        if event is not h11.NEED_DATA:
            assert isinstance(event, h11.Event)
            return event
        data = await connection.receive(read_timeout)
        if not data and state.their_state is h11.SEND_RESPONSE:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        state.receive_data(data)


# ---------------------------------------------------------------------------- the lease


@final
class LeanLease:
    """One model client's use of its run's lean pool; :meth:`aclose` gives it back."""

    def __init__(self, origin: LeanOrigin, headers: Sequence[tuple[str, str]]) -> None:
        self._origin = origin
        self._key = (origin.host, origin.port)
        self._head: list[tuple[bytes, bytes]] = [
            (b"Host", origin.host_header.encode("ascii")),
            (b"Connection", b"keep-alive"),
            (b"User-Agent", _USER_AGENT.encode("ascii")),
            *((name.encode("latin-1"), value.encode("latin-1")) for name, value in headers),
        ]
        self._prefixes: dict[str, bytes] = {}
        self._lease = RunPoolLease(_POOL, _Pool)

    def _prefix(self, path: str) -> bytes:
        """The request's head up to its Content-Length, as h11 writes it (h11 checks it once)."""
        prefix = self._prefixes.get(path)
        if prefix is None:
            state = h11.Connection(h11.CLIENT)
            head = [*self._head, (b"Content-Length", b"0")]
            written = state.send(h11.Request(method=b"POST", target=path.encode(), headers=head))
            assert written is not None
            assert written.endswith(b"Content-Length: 0\r\n\r\n")
            prefix = written[: -len(b"0\r\n\r\n")]
            self._prefixes[path] = prefix
        return prefix

    async def post(
        self,
        path: str,
        content: bytes,
        *,
        connect_timeout: float,
        read_timeout: float,
        write_timeout: float,
    ) -> LeanResponse:
        """Send a POST of ``content`` to ``path`` and read the response's head."""
        data = b"%b%d\r\n\r\n%b" % (self._prefix(path), len(content), content)
        pool = self._lease.pool()
        connection = pool.take(self._key)
        if connection is None:
            connection = await self._connect(connect_timeout)
        release = _Release(pool, self._key)
        try:
            # A server may answer (413, say) and close before it has read the whole
            # request: its answer is read as httpcore reads it; if there is none, the read
            # says why.
            broken = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)
            with (
                trio.CancelScope(deadline=trio.current_time() + write_timeout) as scope,
                contextlib.suppress(*broken),
            ):
                await connection.stream.send_all(data)
            if scope.cancelled_caught:
                raise httpx.WriteTimeout("")
            return await _read_head(connection, release, read_timeout)
        except BaseException:
            release(connection, done=False)
            raise

    async def _connect(self, connect_timeout: float) -> _Connection:
        with trio.move_on_after(connect_timeout) as scope:
            try:
                stream = await trio.open_tcp_stream(self._origin.host, self._origin.port)
            except OSError as error:
                raise httpx.ConnectError(str(error)) from error
            return _Connection(stream)
        assert scope.cancelled_caught
        raise httpx.ConnectTimeout("")

    def aclose(self) -> None:
        """Give the lease back; the last one closes the run's idle connections."""
        last = self._lease.give_back()
        if last is not None:
            last.close()


async def _read_head(
    connection: _Connection, release: _Release, read_timeout: float
) -> LeanResponse:
    """The response's head: read by the lean reader when it is plain, else by h11."""
    buffer = connection.buffer
    while True:
        end = buffer.find(b"\r\n\r\n")
        if end >= 0:
            raw = bytes(buffer[: end + 4])
            head = _parse_head(raw)
            if head is not None:
                del buffer[: end + 4]
                return LeanResponse(head, connection, release, read_timeout)
            break
        if len(buffer) > _MAX_INCOMPLETE or _BLANK_LINE.search(buffer):
            break
        data = await connection.receive(read_timeout)
        if not data:
            break
        buffer += data
    # Not plain, or not all there: h11 reads it from the start, as it would have.
    state = _h11_after_request()
    if buffer:  # (no bytes would tell h11 the stream ended)
        state.receive_data(bytes(buffer))
        buffer.clear()
    while True:
        event = await _next_event(connection, state, read_timeout)
        if isinstance(event, h11.Response):
            return LeanResponse(event, connection, release, read_timeout, state)
        if not isinstance(event, h11.InformationalResponse):  # pragma: no cover
            raise httpx.RemoteProtocolError(f"unexpected {type(event).__name__}")
