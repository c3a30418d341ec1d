"""The lean exchange: model requests to a plain ``http://`` server on h11, pooled per run.

What this module owns:

- **When it is used** (:func:`lean_origin`): a base URL whose scheme is ``http`` and no
  proxy in the environment. Every other server (``https://``, proxies, Unix sockets)
  keeps httpx's client and the shared pool of :mod:`._transport`.
- **The exchange** (:meth:`LeanLease.post`): the request head and body as h11 writes
  them, the response read through h11's state machine, on a Trio TCP stream. A model
  client sends thousands of small streamed requests; httpx's client, transport and
  pool layers cost ~0.55 ms of CPU per request of the ~0.15 ms the HTTP itself takes
  (``benchmarks/model_exchange.py``), and that was a third of penguin's CPU per batch
  task. HTTP parsing and framing stay h11's (the library httpcore itself runs on);
  what is here is the connection handling httpcore would do: keep-alive reuse, expiry,
  the readability check before a reuse, closing whatever was not read to its end.
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

import os
import select
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Final, final
from urllib.parse import urlsplit

import attrs
import h11
import httpx
import trio

from ._transport import RunPoolLease

__all__ = ["LeanLease", "LeanOrigin", "LeanResponse", "lean_origin"]

KEEPALIVE_EXPIRY: Final = 5.0
"""Seconds an idle connection is kept (httpx's default)."""
MAX_IDLE: Final = 1024
"""Idle connections kept per origin at most (those in flight are not counted)."""
_READ_SIZE: Final = 65536
_PROXY_VARIABLES: Final = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")
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
    if any(os.environ.get(name) for name in _PROXY_VARIABLES):
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
    """One kept-alive TCP stream and its h11 state."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.CLIENT)
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


@final
class LeanResponse:
    """A response whose body is being read: what the model client asks of httpx's."""

    def __init__(
        self,
        response: h11.Response,
        connection: _Connection,
        release: _Release,
        read_timeout: float,
    ) -> None:
        self.status_code = response.status_code
        self.reason_phrase = response.reason.decode("ascii", errors="ignore")
        headers: dict[str, str] = {}
        for name, value in response.headers:
            key = name.decode("latin-1")
            text = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        self.headers: Mapping[str, str] = headers  # h11 gives the names in lower case
        self._connection = connection
        self._release = release
        self._read_timeout = read_timeout

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive; the connection is kept once it is all read."""
        connection = self._connection
        while True:
            event = await _next_event(connection, self._read_timeout)
            if isinstance(event, h11.Data):
                if event.data:
                    yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._release(connection, done=True)
                return
            else:  # pragma: no cover - h11 sends nothing else in a body
                raise httpx.RemoteProtocolError(f"unexpected {type(event).__name__} in a body")

    def aclose(self) -> None:
        """Give the connection back: kept if its exchange ended, closed if not."""
        self._release(self._connection, done=False)


@final
class _Release:
    """Hands a connection back to its pool once, kept only when its exchange is done."""

    def __init__(self, pool: _Pool, key: tuple[str, int]) -> None:
        self._pool = pool
        self._key = key
        self._released = False

    def __call__(self, connection: _Connection, *, done: bool) -> None:
        if self._released:
            return
        self._released = True
        state = connection.h11
        if done and state.our_state is h11.DONE and state.their_state is h11.DONE:
            state.start_next_cycle()
            self._pool.give_back(self._key, connection)
        else:
            connection.close()


async def _next_event(connection: _Connection, read_timeout: float) -> h11.Event:
    """h11's next event, reading from the stream as it needs (httpcore's words on errors)."""
    state = connection.h11
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
        try:
            with trio.fail_after(read_timeout):
                data = await connection.stream.receive_some(_READ_SIZE)
        except trio.TooSlowError:
            raise httpx.ReadTimeout("") from None
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
            raise httpx.ReadError(str(error)) from error
        if not data and state.their_state is h11.SEND_RESPONSE:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        state.receive_data(data)


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
        self._lease = RunPoolLease(_POOL, _Pool)

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
        pool = self._lease.pool()
        connection = pool.take(self._key)
        if connection is None:
            connection = await self._connect(connect_timeout)
        release = _Release(pool, self._key)
        try:
            state = connection.h11
            head = [*self._head, (b"Content-Length", str(len(content)).encode("ascii"))]
            data = state.send(h11.Request(method=b"POST", target=path.encode(), headers=head))
            data = (data or b"") + (state.send(h11.Data(data=content)) or b"")
            data += state.send(h11.EndOfMessage()) or b""
            try:
                with trio.fail_after(write_timeout):
                    await connection.stream.send_all(data)
            except trio.TooSlowError:
                raise httpx.WriteTimeout("") from None
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                # A server may answer (413, say) and close before it has read the whole
                # request: its answer is read as httpcore reads it; if there is none,
                # the read says why.
                pass
            while True:
                event = await _next_event(connection, read_timeout)
                if isinstance(event, h11.Response):
                    return LeanResponse(event, connection, release, read_timeout)
                if not isinstance(event, h11.InformationalResponse):  # pragma: no cover
                    raise httpx.RemoteProtocolError(f"unexpected {type(event).__name__}")
        except BaseException:
            release(connection, done=False)
            raise

    async def _connect(self, connect_timeout: float) -> _Connection:
        try:
            with trio.fail_after(connect_timeout):
                stream = await trio.open_tcp_stream(self._origin.host, self._origin.port)
        except trio.TooSlowError:
            raise httpx.ConnectTimeout("") from None
        except OSError as error:
            raise httpx.ConnectError(str(error)) from error
        return _Connection(stream)

    def aclose(self) -> None:
        """Give the lease back; the last one closes the run's idle connections."""
        last = self._lease.give_back()
        if last is not None:
            last.close()
