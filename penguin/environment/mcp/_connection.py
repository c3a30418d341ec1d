"""One live connection to one MCP server, through the official SDK (spec/mcp.md M1.1, M2.5).

Owns opening a transport (stdio through ``_stdio``, Streamable HTTP and SSE through
the SDK's clients), the SDK's ``ClientSession`` over it (the ``initialize``
handshake, answers to the server's pings), discovery (``tools/list``, every page)
and the requests of calls (``tools/call``). A connection is one task: started with
``nursery.start`` into the Environment's nursery, it connects and discovers *before*
reporting itself started — so the connect phase's deadline and its caller's
cancellation bound exactly that part — then lives until :meth:`McpConnection.close`
or until its transport breaks.

Discovery and calls go through the session's JSON-RPC dispatcher as raw requests and
their results are read as plain JSON (``_discovery``, ``_results``): the SDK's models
would reject a listing with one tool missing its schema, which the spec keeps.
Cancelling a request (an interrupt, a timeout) makes the SDK send
``notifications/cancelled``, and the server stays usable. The SDK's own request
timeout is set :data:`SDK_TIMEOUT_MARGIN` seconds above the call's, so the
Environment's close-out decides a timeout.

One message may be as large over HTTP as over stdio (:data:`~._stdio.MAX_LINE`; the
SDK's own limit for a streamed HTTP answer is 1 MiB, which one screenshot exceeds).

Errors, as :class:`McpCallError`: ``disconnected`` when the transport is gone (the
caller reconnects once), otherwise the server's or the SDK's one-line text.

The SDK logs its transports' failures with tracebacks on the ``mcp`` logger; penguin
reports each failure once, in its own words, so that logger is kept off stderr
(``penguin._log.quiet_library``; an application that configures logging still gets it).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, final

import attrs
import httpx2
import mcp_types
import trio
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

from penguin._log import quiet_library
from penguin._tls import shared_context
from penguin._version import __version__
from penguin.config import McpRemoteTransport, McpServerConfig, McpStdioTransport

from .._errors import McpCallError
from ._stdio import MAX_LINE, StdioServer, open_stdio_server

if TYPE_CHECKING:
    from ..sandbox import CommandSandbox

__all__ = ["SDK_TIMEOUT_MARGIN", "McpConnection", "error_reason"]

SDK_TIMEOUT_MARGIN: Final = 5.0
"""Seconds the SDK's request timeout lies beyond the call's own."""
_HTTP_TIMEOUT: Final = httpx2.Timeout(30.0, read=300.0)
"""The Streamable HTTP client's limits, the SDK's defaults: 30 s to connect, write or wait
for the pool, 300 s between two reads (a server may hold a response stream open)."""
_MAX_PAGES: Final = 100
_PROTOCOL_HEADER: Final = "mcp-protocol-version"
_CLIENT: Final = mcp_types.Implementation(name="penguin", version=__version__)

quiet_library("mcp")


async def remote_tls_context() -> ssl.SSLContext:
    """The TLS context of remote MCP connections: one per process, made in a worker.

    It is httpx2's default, the one the SDK's clients would make each for itself: the
    system's trust store, or ``SSL_CERT_FILE``/``SSL_CERT_DIR`` when set (the SDK's
    choice, not certifi's bundle as penguin's model clients have, so a CA installed in
    the system store verifies). Making one reads and parses the CA files, about 30 ms
    of CPU here, which every session of a batch with a remote server paid; it is made
    once for each value of the two variables, as they are when a connection opens.
    """
    return await shared_context(httpx2.create_ssl_context)


def error_reason(exc: BaseException) -> str:
    """A one-line reason for a failed connect or request."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        text = exc.message
    elif isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())[:300]


@final
@attrs.define(eq=False)
class McpConnection:
    """A connection to ``server``; run :meth:`run` with ``nursery.start``.

    ``owner`` is the marker a stdio server's process carries; ``workspace`` its
    default directory.
    """

    server: McpServerConfig
    workspace: Path
    owner: str
    sandbox: CommandSandbox | None = attrs.field(default=None, kw_only=True)
    """The session's sandbox, for a stdio server whose entry sets ``"sandbox": true``."""
    tools: list[Mapping[str, Any]] = attrs.field(factory=list)
    """The raw tools of the listing made when it connected."""
    stdio: StdioServer | None = None
    _dispatcher: JSONRPCDispatcher[Any] | None = None
    _headers: dict[str, str] = attrs.field(factory=dict)
    _stop: trio.Event = attrs.field(factory=trio.Event)
    ended: trio.Event = attrs.field(factory=trio.Event)
    """Set once the connection is over (closed or broken) and its resources released."""

    @property
    def alive(self) -> bool:
        """Whether requests may still be sent."""
        if self.ended.is_set() or self._stop.is_set() or self._dispatcher is None:
            return False
        return self.stdio is None or not self.stdio.exited.is_set()

    def close(self) -> None:
        """Ask the connection to end; :attr:`ended` tells when it did."""
        self._stop.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Connect, handshake and discover; report started; live until closed or broken.

        Before it reports started, a failure raises (the connect phase reads the
        reason from it, see :meth:`failure_reason`); afterwards it only ends the
        connection.
        """
        started = False
        try:
            async with AsyncExitStack() as stack:
                read, write = await self._open_transport(stack)
                dispatcher: JSONRPCDispatcher[Any] = JSONRPCDispatcher(read, write)
                session = await stack.enter_async_context(
                    ClientSession(dispatcher=dispatcher, client_info=_CLIENT)
                )
                await session.initialize()
                version = session.protocol_version
                if version:
                    self._headers = {_PROTOCOL_HEADER: version}
                self._dispatcher = dispatcher
                self.tools = await self._list_tools()
                task_status.started()
                started = True
                await self._wait_until_over()
        except Exception:
            if not started:
                raise
        finally:
            self._dispatcher = None
            self.ended.set()

    async def _wait_until_over(self) -> None:
        if self.stdio is None:
            await self._stop.wait()
            return
        async with trio.open_nursery() as nursery:
            exited = self.stdio.exited

            async def on_exit() -> None:
                await exited.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(on_exit)
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    def failure_reason(self, exc: BaseException) -> str:
        """Why connecting failed: the stdio server's exit when it exited, else the error."""
        if self.stdio is not None:
            exited = self.stdio.exit_reason()
            if exited is not None:
                return exited
        transport = self.server.transport
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        if (
            self.stdio is None
            and isinstance(transport, McpStdioTransport)
            and isinstance(exc, OSError)
        ):
            directory = self.workspace / transport.cwd if transport.cwd else self.workspace
            where = ""
            if exc.filename is not None and os.fspath(exc.filename) == os.fspath(directory):
                where = f" in {os.fspath(directory)!r}"  # its chdir failed, not its exec
            return f"cannot start {transport.command!r}{where}: {error_reason(exc)}"
        return error_reason(exc)

    def timeout_reason(self, seconds: float) -> str:
        """Why connecting timed out, with what a garbage-speaking server said."""
        reason = f"no answer within {seconds:g}s"
        if self.stdio is not None:
            exited = self.stdio.exit_reason()
            if exited is not None:
                return exited
            if self.stdio.garbage is not None:
                reason += f" (it wrote {self.stdio.garbage!r}, which is not JSON-RPC)"
        return reason

    async def _open_transport(self, stack: AsyncExitStack) -> tuple[Any, Any]:
        transport = self.server.transport
        if isinstance(transport, McpStdioTransport):
            server, read, write = await stack.enter_async_context(
                open_stdio_server(
                    transport,
                    workspace=self.workspace,
                    owner=self.owner,
                    sandbox=self.sandbox if transport.sandbox else None,
                )
            )
            self.stdio = server
            return read, write
        assert isinstance(transport, McpRemoteTransport)
        headers = dict(transport.headers)
        # httpx2's own default TLS context, which a client would otherwise make where it
        # is built, on the loop's thread: it reads the CA files (DESIGN §2).
        tls = await remote_tls_context()
        if transport.kind == "sse":

            def client_with_tls(
                headers: dict[str, str] | None = None,
                timeout: httpx2.Timeout | None = None,
                auth: httpx2.Auth | None = None,
            ) -> httpx2.AsyncClient:  # the SDK's factory's client, given the context
                return httpx2.AsyncClient(
                    headers=headers, timeout=timeout or _HTTP_TIMEOUT, auth=auth, verify=tls
                )

            return await stack.enter_async_context(
                sse_client(
                    transport.url, headers=headers or None, httpx_client_factory=client_with_tls
                )
            )
        # httpx2 is the client the SDK's transports take (it comes with the SDK); built
        # here, not with the SDK's private factory, with the same limits.
        client = await stack.enter_async_context(
            httpx2.AsyncClient(headers=headers or None, timeout=_HTTP_TIMEOUT, verify=tls)
        )
        streams = await stack.enter_async_context(
            streamable_http_client(transport.url, http_client=client, max_sse_event_size=MAX_LINE)
        )
        return streams[0], streams[1]

    async def _request(
        self, method: str, params: Mapping[str, Any] | None, seconds: float | None = None
    ) -> dict[str, Any]:
        dispatcher = self._dispatcher
        if dispatcher is None or not self.alive:
            raise McpCallError("disconnected", disconnected=True)
        opts: CallOptions = {"headers": dict(self._headers)} if self._headers else {}
        if seconds is not None:
            opts["timeout"] = seconds  # the SDK's own deadline, beyond the close-out's
        try:
            return await dispatcher.send_raw_request(method, params, opts)
        except MCPError as exc:
            gone = exc.code == mcp_types.CONNECTION_CLOSED or not self.alive
            raise McpCallError(error_reason(exc), disconnected=gone) from exc
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise McpCallError(error_reason(exc), disconnected=True) from exc
        except Exception as exc:  # the SDK or the transport failed in a way of its own
            gone = not self.alive
            raise McpCallError(error_reason(exc), disconnected=gone) from exc

    async def _list_tools(self) -> list[Mapping[str, Any]]:
        tools: list[Mapping[str, Any]] = []
        cursor: object = None
        for _ in range(_MAX_PAGES):
            result = await self._request("tools/list", {"cursor": cursor} if cursor else None)
            page = result.get("tools")
            if not isinstance(page, list):
                raise ValueError('the tools/list result has no "tools" list')
            tools.extend(page)
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                break
        return tools

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any], timeout_ms: int
    ) -> dict[str, Any]:
        """Send ``tools/call``; the raw result, or :class:`McpCallError`."""
        timeout = timeout_ms / 1000 + SDK_TIMEOUT_MARGIN if timeout_ms > 0 else None
        return await self._request(
            "tools/call", {"name": name, "arguments": dict(arguments)}, timeout
        )
