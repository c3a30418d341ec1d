"""Running the server: hypercorn's Trio worker, the token, the printed line, signals (S1).

:func:`open_server` is the whole server as an ``async with`` block, for tests and for
embedding: it opens the sessions (:class:`~._sessions.ServerSessions`), serves the
guarded app with ``hypercorn.trio.serve`` in its nursery, and yields a
:class:`RunningServer` once the socket listens. Leaving the block stops accepting,
then shuts the sessions down (S1.4). Everything runs on the caller's Trio loop: no
asyncio loop is created anywhere (starlette's and hypercorn's Trio paths only).

:func:`run_server` is ``penguin server``: it prints the one line
``penguin server: http://H:PORT/?token=TOKEN`` on stdout, logs go to stderr, and it
runs until SIGINT or SIGTERM; a data root it cannot write is refused before it
starts (:func:`unwritable_root`, one line naming the path, exit 1); a second SIGINT
during the shutdown stops at once (still ending every process). hypercorn's access
log is off: it would record the ``?token=`` query string (S1.2).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import secrets
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, Final, TextIO, cast, final

import attrs
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from penguin import _log
from penguin import config as cfg
from penguin._concurrency import collapse_single
from penguin._gc import many_sessions_gc

from ._app import build_router
from ._asgi import CONTENT_SECURITY_POLICY, Guard, application
from ._compat import UI_CONTENT_SECURITY_POLICY, UiFolder
from ._index import INDEX_FILE
from ._sessions import IDLE_CLOSE, SHUTDOWN_GRACE, ServerSessions

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "TOKEN_VARIABLE",
    "RunningServer",
    "ServerOptions",
    "allowed_hosts",
    "is_loopback",
    "open_server",
    "resolve_token",
    "run_server",
    "unwritable_root",
]

logger: Final = _log.child("server")

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 7364
TOKEN_VARIABLE: Final = "PENGUIN_SERVER_TOKEN"
_WILDCARDS: Final = frozenset({"0.0.0.0", "::"})
_HTTP_GRACE: Final = 2.0
"""Seconds hypercorn gives open connections once it stops accepting."""
KEEP_ALIVE: Final = 75.0
"""Seconds an idle connection is kept open (hypercorn's default is 5). A client that
keeps its idle connections exactly as long (httpx: 5 s) reuses one just as the server
closes it, and its request fails ("Server disconnected without sending a response",
seen under load with 64 sessions): the server waits longer than common clients do
(httpx 5 s, aiohttp 15 s), so they give up an idle connection first."""


@final
@attrs.frozen
class ServerOptions:
    """What ``penguin server`` is started with (S1.1)."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    root: Path | None = None
    """The data root; None is ``$PENGUIN_HOME`` or ``~/.penguin/data``."""
    project_id: str = cfg.DEFAULT_PROJECT_ID
    """The project the page opens on."""
    allow_hosts: tuple[str, ...] = ()
    """Extra ``Host`` names accepted when ``host`` is a wildcard (S2.3)."""
    token: str | None = None
    """None: ``$PENGUIN_SERVER_TOKEN`` when set and non-empty, else a new random one."""
    grace: float = SHUTDOWN_GRACE
    idle_close: float | None = IDLE_CLOSE
    """Seconds after which an idle session's Environment is closed; None: never."""
    ui: Path | None = None
    """``--ui DIR``: a built single-page front end served instead of penguin's page."""


@final
@attrs.frozen
class RunningServer:
    """A server that listens: where, with which token, and its sessions."""

    host: str
    port: int
    token: str = attrs.field(repr=False)
    sessions: ServerSessions

    @property
    def base_url(self) -> str:
        """``http://H:PORT`` (an IPv6 host in brackets)."""
        return f"http://{_url_host(self.host)}:{self.port}"

    @property
    def login_url(self) -> str:
        """The URL ``penguin server`` prints: ``http://H:PORT/?token=TOKEN``."""
        return f"{self.base_url}/?token={self.token}"


def resolve_token(given: str | None = None) -> str:
    """``given``, else ``$PENGUIN_SERVER_TOKEN`` (non-empty), else 32 random bytes (S1.2)."""
    if given:
        return given
    configured = os.environ.get(TOKEN_VARIABLE, "")
    if configured:
        return configured
    return secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine (``localhost`` or a loopback address)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def unwritable_root(root: Path) -> str | None:
    """Why the server cannot keep its data under ``root`` (one line naming the path), or None.

    The root (created if missing), a probe file in it, and the index file if it exists
    must all be writable: a read-only or unwritable root is refused at start, before
    anything is served, rather than failing at the first write (issue 21 item 4). The
    words are those ``penguin run``, ``chat`` and ``batch`` use for the same refusal;
    the check itself writes, so it holds for every user (root included) and file system.
    """
    index = root / INDEX_FILE
    where = root
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = root / f".penguin-write-probe-{os.getpid()}"
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"x")
        finally:
            os.close(fd)
            probe.unlink(missing_ok=True)
        if index.exists():
            where = index
            with open(index, "r+b"):
                pass
    except OSError as exc:
        existing = where
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if where is root and not existing.is_dir():
            return f"the data root {root} cannot be used: {existing} is not a folder"
        why = (exc.strerror or str(exc) or type(exc).__name__).lower()
        return f"the data root {root} is not writable ({existing}: {why})"
    return None


def _url_host(host: str) -> str:
    bare = host.strip("[]")
    return f"[{bare}]" if ":" in bare else bare


def allowed_hosts(host: str, extra: Sequence[str] = ()) -> frozenset[str]:
    """The ``Host`` names the server answers to (S2.3)."""
    names = {"localhost", "127.0.0.1", "[::1]", _url_host(host).lower()}
    if host.strip("[]") in _WILDCARDS:
        names.update(_url_host(name).lower() for name in extra)
    return frozenset(names)


def _hypercorn_config(options: ServerOptions) -> Config:
    config = Config()
    config.bind = [f"{_url_host(options.host)}:{options.port}"]
    config.accesslog = None  # it would log the ?token= query string
    http_log = _log.child("server.http")
    if http_log.level == logging.NOTSET:
        http_log.setLevel(logging.WARNING)
    config.errorlog = http_log
    config.graceful_timeout = _HTTP_GRACE
    config.keep_alive_timeout = KEEP_ALIVE
    config.include_server_header = False
    return config


@asynccontextmanager
async def open_server(options: ServerOptions = ServerOptions()) -> AsyncIterator[RunningServer]:
    """Serve until the block ends; see the module docstring."""
    token = resolve_token(options.token)
    ui = None if options.ui is None else UiFolder(options.ui)  # UiFolderError before listening
    if options.allow_hosts and options.host.strip("[]") not in _WILDCARDS:
        logger.warning(
            "penguin server: --allow-host is used only with a wildcard --host (0.0.0.0 or ::)"
        )
    with collapse_single(), many_sessions_gc():
        async with (
            ServerSessions.open(
                options.root, grace=options.grace, idle_close=options.idle_close
            ) as sessions,
            _serving(options, sessions, token, ui) as server,
        ):
            yield server


@asynccontextmanager
async def _serving(
    options: ServerOptions, sessions: ServerSessions, token: str, ui: UiFolder | None
) -> AsyncIterator[RunningServer]:
    app = Guard(
        application(build_router(sessions, token=token, project_id=options.project_id, ui=ui)),
        token=token,
        allowed_hosts=allowed_hosts(options.host, options.allow_hosts),
        content_security_policy=CONTENT_SECURITY_POLICY
        if ui is None
        else UI_CONTENT_SECURITY_POLICY,
    )
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(
            partial(
                serve,
                cast(Any, app),
                _hypercorn_config(options),
                shutdown_trigger=stop.wait,
            )
        )
        port = int(binds[0].rsplit(":", 1)[1])
        try:
            yield RunningServer(options.host, port, token, sessions)
        finally:
            stop.set()
            await sessions.shutdown()


async def run_server(options: ServerOptions, out: TextIO | None = None) -> int:
    """``penguin server``: serve until SIGINT/SIGTERM; the exit status (S1.1, S1.4)."""
    out = out or sys.stdout
    if not is_loopback(options.host):
        logger.warning(
            "penguin server: listening on %s: anyone who can reach this address and has the "
            "token can run commands as you",
            options.host,
        )
    root = cfg.data_root(options.root)
    refusal = await trio.to_thread.run_sync(unwritable_root, root)
    if refusal is not None:
        print(f"penguin server: {refusal}", file=sys.stderr)
        return 1
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as outer:
            stopping = trio.Event()

            async def watch_signals() -> None:
                async for signum in signals:
                    if not stopping.is_set():
                        logger.info("penguin server: stopping (%s)", signal.Signals(signum).name)
                        stopping.set()
                    elif signum == signal.SIGINT:
                        logger.warning("penguin server: stopping now")
                        outer.cancel_scope.cancel()

            outer.start_soon(watch_signals)
            try:
                async with open_server(options) as server:
                    print(f"penguin server: {server.login_url}", file=out, flush=True)
                    await stopping.wait()
            except OSError as exc:
                where = f"{options.host}:{options.port}"
                print(f"penguin server: cannot listen on {where}: {exc}", file=sys.stderr)
                outer.cancel_scope.cancel()
                return 1
            outer.cancel_scope.cancel()
    return 0
