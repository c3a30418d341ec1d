"""The process's TLS contexts for its HTTP clients: each made once, off the event loop.

Making a context reads and parses a CA bundle (20–40 ms of CPU, and file reads that a
network file system can hang), so a process makes each kind once, in a worker thread,
never on the event loop's thread (DESIGN §2), and its clients share it. A kind is the
function that makes it (:func:`shared_context`); each is made once for each value of
``SSL_CERT_FILE``/``SSL_CERT_DIR``, read when a context is asked for, since both kinds
honour them.

- :func:`shared_tls_context`: penguin's own, the context httpx makes by default (the
  two variables when set, else certifi's bundle). The model clients' connection pool
  (``penguin.llm._transport``) and the image tools' downloads use it.
- Remote MCP connections take the MCP SDK's choice, the system's trust store
  (``penguin.environment.mcp._connection``), through :func:`shared_context`.
"""

from __future__ import annotations

import os
import ssl
import threading
from collections.abc import Callable
from typing import Final, TypeAlias

from penguin._concurrency import run_in_worker

__all__ = ["shared_context", "shared_tls_context"]

_Key: TypeAlias = tuple[Callable[[], ssl.SSLContext], str | None, str | None]

_CONTEXTS: dict[_Key, ssl.SSLContext] = {}
_LOCK: Final = threading.Lock()


def _made(key: _Key) -> ssl.SSLContext:
    """The context of ``key``, made now if it is not yet: blocking, so a worker's.

    The lock keeps it to one, whichever threads of the process ask at once.
    """
    with _LOCK:
        context = _CONTEXTS.get(key)
        if context is None:
            context = _CONTEXTS[key] = key[0]()
        return context


async def shared_context(make: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
    """The process's context made by ``make`` for the trust settings now.

    Made in a worker thread the first time for each value of ``SSL_CERT_FILE`` and
    ``SSL_CERT_DIR``; no checkpoint after that. ``make`` is the key: pass one function
    (a module's, not a new lambda) for one kind.
    """
    key = (make, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    context = _CONTEXTS.get(key)
    return context if context is not None else await run_in_worker(_made, key)


def _penguin_context() -> ssl.SSLContext:
    import httpx  # here: only a process that makes an HTTPS request needs it

    return httpx.create_ssl_context(trust_env=True)


async def shared_tls_context() -> ssl.SSLContext:
    """Penguin's own context (httpx's default); see the module's docstring."""
    return await shared_context(_penguin_context)
