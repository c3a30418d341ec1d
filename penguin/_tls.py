"""The process's one TLS context for penguin's HTTP clients, made off the event loop.

It is the context httpx makes by default (``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` when
set, else certifi's bundle), made once per process instead of once per client. Making
it reads and parses the CA bundle (about 20 ms of CPU, and a file read that a network
file system can hang), so async code takes it with :func:`shared_tls_context`, which
makes it in a worker thread the first time: never on the event loop's thread (DESIGN
§2). The model clients' connection pool (``penguin.llm._transport``) and the image
tools' downloads use it.
"""

from __future__ import annotations

import ssl
import threading
from typing import Final

from penguin._concurrency import run_in_worker

__all__ = ["shared_tls_context", "tls_context"]

_TLS: list[ssl.SSLContext] = []
_LOCK: Final = threading.Lock()


def tls_context() -> ssl.SSLContext:
    """The context, made now if it is not yet: blocking, so in a worker thread then.

    The lock keeps it to one, whichever threads of the process ask at once.
    """
    with _LOCK:
        if not _TLS:
            import httpx  # here: only a process that makes an HTTPS request needs it

            _TLS.append(httpx.create_ssl_context(trust_env=True))
        return _TLS[0]


async def shared_tls_context() -> ssl.SSLContext:
    """The context; made in a worker thread the first time (no checkpoint after that)."""
    return _TLS[0] if _TLS else await run_in_worker(tls_context)
