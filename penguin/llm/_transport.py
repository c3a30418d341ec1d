"""The model clients' HTTP connections: one pool per Trio run, kept in small shards.

What this module owns:

- **One pool for every model client of a Trio run** (:func:`shared_transport`): the
  clients of one batch, one server or one chat each hand their requests to it, so a
  process holds one connection per request in flight (and a few idle ones), not one
  pool per client or per session. Each client holds a lease (:class:`ClientTransport`);
  the pool opens at a lease's first request (inside the run, so a client may be built
  outside it or in a worker thread) and closes when the last lease is closed.
- **Shards of :data:`SHARD_CONNECTIONS`**: httpcore looks at every connection of its pool
  for each request it places and each response it closes (a readability poll per idle
  connection), so a single pool of 256 connections costs 256 polls a request. The pool
  is a list of small ``httpx.AsyncHTTPTransport`` s instead; a request goes to the
  least busy shard with room, and a new shard opens when all are full. A connection a
  server closed while idle is still noticed (by its shard's poll) before it is used.
- **The lease of a per-run pool** (:class:`RunPoolLease`), the counting both this pool
  and the lean exchange's (``_lean``) use: get-or-open the run's pool at first use,
  one lease per client, the last lease given back closes it.
- **One TLS context per process** (``penguin._tls``), made the way httpx makes its
  default one (``SSL_CERT_FILE``/``SSL_CERT_DIR`` honoured; once for each value of
  them), not per client: the pool's first request makes it in a worker thread, never
  on the loop's (DESIGN §2). A new shard's transport takes the one of its request.

What it does not own: requests, timeouts, headers and error classification
(``_openai``); proxies from the environment (:func:`environment_proxies`): httpx mounts
them only in a client without a transport of its own, so such a client has its own
pool, with this process's TLS context.
"""

from __future__ import annotations

import ssl
import urllib.request
from collections.abc import AsyncIterator, Callable
from typing import Final, Generic, Protocol, TypeVar, final

import httpx
import trio

from penguin._tls import shared_tls_context

__all__ = [
    "SHARD_CONNECTIONS",
    "ClientTransport",
    "LeasedPool",
    "RunPoolLease",
    "environment_proxies",
    "shared_transport",
]

SHARD_CONNECTIONS: Final = 8
"""Requests in flight (and idle connections kept) per shard of the pool."""
KEEPALIVE_EXPIRY: Final = 5.0
"""Seconds an idle connection is kept (httpx's default)."""


class LeasedPool(Protocol):
    """What :class:`RunPoolLease` counts on: the leases held, and whether it closed."""

    leases: int
    closed: bool


P = TypeVar("P", bound=LeasedPool)


@final
class RunPoolLease(Generic[P]):
    """One client's lease of the pool its Trio run shares (kept in ``var``, default None).

    :meth:`pool` takes the lease at first use, inside the run (so the client may be
    built outside it), opening the run's pool with ``make`` when there is none or the
    last one closed. :meth:`give_back` returns the pool when this was its last lease,
    for the caller to close (mark it ``closed`` too: the run's next lease then opens a
    new one); after it, :meth:`pool` raises.
    """

    __slots__ = ("_closed", "_make", "_pool", "_var")

    def __init__(self, var: trio.lowlevel.RunVar[P | None], make: Callable[[], P]) -> None:
        self._var = var
        self._make = make
        self._pool: P | None = None
        self._closed = False

    def pool(self) -> P:
        if self._closed:
            raise RuntimeError("the model client is closed")
        pool = self._pool
        if pool is None:
            pool = self._var.get()
            if pool is None or pool.closed:
                pool = self._make()
                self._var.set(pool)
            pool.leases += 1
            self._pool = pool
        return pool

    def give_back(self) -> P | None:
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is None:
            return None
        pool.leases -= 1
        return pool if pool.leases == 0 else None


def environment_proxies(schemes: tuple[str, ...] = ("http", "https", "all")) -> bool:
    """Whether the environment names a proxy for one of ``schemes`` (``HTTPS_PROXY``…).

    httpx honours them only in a client that has no transport of its own, so a model
    client then keeps httpx's pool and leaves the run's shared one (``_openai``); a
    plain ``http://`` server leaves the lean exchange when ``http`` or ``all`` has one
    (``_lean``). Read as httpx reads them (``urllib.request.getproxies``).
    """
    return any(scheme in schemes for scheme in urllib.request.getproxies())


@final
class _Shard:
    def __init__(self, tls: ssl.SSLContext) -> None:
        self.transport = httpx.AsyncHTTPTransport(
            verify=tls,
            limits=httpx.Limits(
                max_connections=None,
                max_keepalive_connections=SHARD_CONNECTIONS,
                keepalive_expiry=KEEPALIVE_EXPIRY,
            ),
        )
        self.active = 0


@final
class _Released(httpx.AsyncByteStream):
    """A response body that gives its shard's slot back once, when it is closed."""

    def __init__(self, stream: httpx.AsyncByteStream, shard: _Shard) -> None:
        self._stream = stream
        self._shard: _Shard | None = shard

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        shard, self._shard = self._shard, None
        if shard is not None:
            shard.active -= 1
        await self._stream.aclose()


@final
class _Pool:
    """The shards of one Trio run, and how many leases hold them."""

    def __init__(self) -> None:
        self.shards: list[_Shard] = []
        self.leases = 0
        self.closed = False

    def pick(self, tls: ssl.SSLContext) -> _Shard:
        best: _Shard | None = None
        for shard in self.shards:
            if shard.active < SHARD_CONNECTIONS and (best is None or shard.active < best.active):
                best = shard
        if best is None:
            best = _Shard(tls)
            self.shards.append(best)
        return best

    async def send(self, request: httpx.Request) -> httpx.Response:
        shard = self.pick(await shared_tls_context())  # a new shard's transport needs it
        shard.active += 1
        try:
            response = await shard.transport.handle_async_request(request)
        except BaseException:
            shard.active -= 1
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Released(response.stream, shard)
        return response

    async def aclose(self) -> None:
        self.closed = True  # the run's next lease opens a new pool
        shards, self.shards = self.shards, []
        with trio.CancelScope(shield=True):
            for shard in shards:
                await shard.transport.aclose()


_POOL: Final = trio.lowlevel.RunVar[_Pool | None]("penguin_llm_pool", default=None)


@final
class ClientTransport(httpx.AsyncBaseTransport):
    """One client's lease of its Trio run's pool (an ``httpx`` transport).

    The lease is taken at the first request and given back by :meth:`aclose`; the
    last lease given back closes the pool's connections.
    """

    def __init__(self) -> None:
        self._lease = RunPoolLease(_POOL, _Pool)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._lease.pool().send(request)

    async def aclose(self) -> None:
        last = self._lease.give_back()
        if last is not None:
            await last.aclose()


def shared_transport() -> ClientTransport:
    """A new lease of the current Trio run's pool, for one model client."""
    return ClientTransport()
