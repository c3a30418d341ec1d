"""The MCP servers of one Environment and their tools (spec/mcp.md M1.2-M1.4, M2).

:class:`McpTools` is the one object the Environment owns for MCP. It connects every
configured server in parallel the first time it is asked (:meth:`McpTools.connect`,
from the first ``list_tools()``), each within its ``connectTimeoutMs``, and keeps the
tools discovered then for the Environment's life (a snapshot: a server's
``tools/list_changed`` is not followed). A server that fails is skipped with one
stderr line; the others go on. A connect phase cancelled by its caller (a run
interrupted while connecting) leaves nothing connected, and the next call connects
afresh.

Each discovered tool is an :class:`McpTool`: a plain tool of the Environment's
contract (``name``, ``definition``, ``execute``), so the close-out frames, limits,
archives and classifies it like any builtin. Its errors are outputs
(``[mcp error: …]``, stop ``failed``); a server found dead is reconnected once, by
the next call of one of its tools, within its ``connectTimeoutMs``.

The connections live in the Environment's nursery; :meth:`McpTools.aclose` (the
Environment's close) ends them, and with them every stdio server process, then
sweeps for anything still carrying their marker. The SDK is imported only when a
server is actually connected, so an Environment without MCP servers never loads it.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, final

import trio

from penguin import protocol as om
from penguin._log import warn
from penguin.config import McpServerConfig, Permission, ToolDefinitionConfig

from .._contract import ToolContext, ToolResult
from .._errors import McpCallError
from ._discovery import DiscoveredTool, discover_tools
from ._results import map_result

if TYPE_CHECKING:
    from ..sandbox import CommandSandbox
    from ._connection import McpConnection

__all__ = ["CLOSE_DEADLINE", "McpTool", "McpTools", "disconnected_text", "error_text"]

CLOSE_DEADLINE: Final = 5.0
"""Seconds the Environment's close waits for its connections to end by themselves."""


def disconnected_text(server: str) -> str:
    """The output of a call whose server is gone."""
    return f'[mcp error: server "{server}" disconnected]'


def error_text(reason: str) -> str:
    """The output of a call that got an error instead of a result."""
    return f"[mcp error: {reason}]"


def _unavailable(server: str, reason: str) -> None:
    warn(f'[penguin] MCP server "{server}" unavailable: {reason}')


@final
class McpTool:
    """One MCP tool as a tool of the Environment (``mcp__<server>__<tool>``)."""

    def __init__(self, owner: McpTools, server: McpServerConfig, found: DiscoveredTool) -> None:
        self._owner = owner
        self._server = server
        self._remote = found.remote_name
        self.definition: ToolDefinitionConfig = found.definition
        self.name: str = found.definition.name

    @property
    def server(self) -> str:
        """The server's name in the configuration."""
        return self._server.name

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Call the tool on its server; errors become the call's failed output."""
        try:
            raw = await self._owner.call(self._server, self._remote, args, ctx.definition)
        except McpCallError as exc:
            text = disconnected_text(self.server) if exc.disconnected else error_text(exc.text)
            await ctx.emit(text)
            return ToolResult(stop_reason="failed")
        try:
            mapped = map_result(raw)
        except ValueError as exc:
            await ctx.emit(error_text(f"the server's answer is not a tools/call result: {exc}"))
            return ToolResult(stop_reason="failed")
        await ctx.emit(mapped.text)
        return ToolResult(stop_reason="failed" if mapped.failed else None, images=mapped.images)


@final
class McpTools:
    """The MCP servers of an Environment: connecting, the tool snapshot, calls, closing.

    ``owner`` begins the marker of every stdio server process (the Environment's own
    marker, so its watchdog and sweeps cover them); ``reserved`` are the names of the
    Environment's other tools, which an MCP tool may not take.
    """

    def __init__(
        self,
        servers: Sequence[McpServerConfig],
        *,
        nursery: trio.Nursery,
        workspace: Path,
        owner: str,
        reserved: Iterable[str] = (),
        sandbox: CommandSandbox | None = None,
    ) -> None:
        self._servers = tuple(servers)
        self._sandbox = sandbox
        self._nursery = nursery
        self._workspace = workspace
        self._owner = f"{owner}/mcp-"
        self._reserved = frozenset(reserved)
        self._phase = trio.Lock()
        self._results: tuple[om.McpServerConnectResult, ...] | None = None
        self._connections: dict[str, McpConnection] = {}
        self._locks: dict[str, trio.Lock] = {server.name: trio.Lock() for server in servers}
        self._down: set[str] = set()
        self._tools: dict[str, McpTool] = {}
        self._spawned = False
        self._closed = False

    # ------------------------------------------------------------------ the snapshot

    @property
    def server_names(self) -> tuple[str, ...]:
        """The configured servers, in order."""
        return tuple(server.name for server in self._servers)

    @property
    def results(self) -> tuple[om.McpServerConnectResult, ...] | None:
        """How each server's connect ended, once the phase ran (``None`` before)."""
        return self._results

    def tools(self) -> list[McpTool]:
        """The discovered tools, by server in configured order, each in listing order."""
        return list(self._tools.values())

    def get(self, name: str) -> McpTool | None:
        """The tool called ``name``, if a server offered it."""
        return self._tools.get(name)

    def permission(self, name: str) -> Permission | None:
        """The permission of an MCP tool (M2.2), ``None`` for an unknown name."""
        tool = self._tools.get(name)
        return None if tool is None else tool.definition.permission

    # ------------------------------------------------------------------ connecting

    async def connect(self) -> tuple[om.McpServerConnectResult, ...]:
        """Connect every server in parallel, once; later calls return the same results.

        Cancelling the caller during the phase closes what it connected, so the next
        call starts afresh.
        """
        async with self._phase:
            if self._results is None and not self._closed:
                self._results = await self._connect_all()
            return self._results or ()

    async def _connect_all(self) -> tuple[om.McpServerConnectResult, ...]:
        outcomes: dict[str, tuple[McpConnection | None, om.McpServerConnectResult]] = {}

        async def one(server: McpServerConfig) -> None:
            outcomes[server.name] = await self._open(server)

        try:
            async with trio.open_nursery() as nursery:
                for server in self._servers:
                    nursery.start_soon(one, server)
        except BaseException:
            for connection, _ in outcomes.values():
                if connection is not None:
                    connection.close()
            raise
        results = []
        for server in self._servers:
            connection, result = outcomes[server.name]
            if connection is not None:
                self._connections[server.name] = connection
                kept = self._adopt(server, connection.tools)
                result = om.McpServerConnectResult(
                    server=result.server,
                    transport=result.transport,
                    status="completed",
                    duration_ms=result.duration_ms,
                    tools=kept,
                )
            results.append(result)
        return tuple(results)

    def _adopt(self, server: McpServerConfig, listing: Sequence[Mapping[str, Any]]) -> int:
        found, warnings = discover_tools(server, listing)
        for line in warnings:
            warn(line)
        kept = 0
        for item in found:
            name = item.definition.name
            if name in self._reserved:
                warn(
                    f'[penguin] MCP server "{server.name}": tool {item.remote_name!r} skipped, '
                    f"{name!r} is the name of another tool of this Environment"
                )
                continue
            self._tools[name] = McpTool(self, server, item)
            kept += 1
        return kept

    async def _open(
        self, server: McpServerConfig
    ) -> tuple[McpConnection | None, om.McpServerConnectResult]:
        """Connect one server within its budget; the connection, or None and why not."""
        from ._connection import McpConnection

        connection = McpConnection(
            server,
            self._workspace,
            f"{self._owner}{server.name}-{secrets.token_hex(4)}",
            sandbox=self._sandbox,
        )
        self._spawned = self._spawned or server.transport.kind == "stdio"
        seconds = server.connect_timeout_ms / 1000
        began = trio.current_time()
        reason: str | None = None
        with trio.move_on_after(seconds) as budget:
            try:
                await self._nursery.start(connection.run)
            except Exception as exc:
                reason = connection.failure_reason(exc)
        if budget.cancelled_caught:
            reason = connection.timeout_reason(seconds)
        elapsed = round((trio.current_time() - began) * 1000)
        if reason is not None:
            _unavailable(server.name, reason)
            failed = om.McpServerConnectResult(
                server=server.name,
                transport=server.transport.kind,
                status="failed",
                duration_ms=elapsed,
                error=reason,
            )
            return None, failed
        done = om.McpServerConnectResult(
            server=server.name,
            transport=server.transport.kind,
            status="completed",
            duration_ms=elapsed,
            tools=len(connection.tools),
        )
        return connection, done

    # ------------------------------------------------------------------ calls

    async def _live(self, server: McpServerConfig) -> McpConnection | None:
        """The server's connection, reconnected once if it died; None if it stays down."""
        connection = self._connections.get(server.name)
        if connection is not None and connection.alive:
            return connection
        async with self._locks[server.name]:
            connection = self._connections.get(server.name)
            if connection is not None and connection.alive:
                return connection
            if server.name in self._down or self._closed:
                return None
            fresh, _ = await self._open(server)
            if fresh is None:
                self._down.add(server.name)
                return None
            self._connections[server.name] = fresh
            return fresh

    async def call(
        self,
        server: McpServerConfig,
        tool: str,
        arguments: Mapping[str, Any],
        definition: ToolDefinitionConfig,
    ) -> dict[str, Any]:
        """``tools/call`` on the server's live connection (raises ``McpCallError``)."""
        connection = await self._live(server)
        if connection is None:
            raise McpCallError("disconnected", disconnected=True)
        try:
            return await connection.call_tool(tool, arguments, definition.timeout_ms)
        except McpCallError as exc:
            if exc.disconnected:
                connection.close()  # the next call reconnects
            raise

    # ------------------------------------------------------------------ closing

    async def aclose(self) -> None:
        """End every connection (and its server process); safe to call twice.

        Shielded and bounded: what has not ended after :data:`CLOSE_DEADLINE` is left
        to the Environment's nursery cancellation, whose stdio clean-up is shielded.
        Then anything still carrying an MCP marker of this Environment is killed.
        """
        self._closed = True
        connections = list(self._connections.values())
        for connection in connections:
            connection.close()
        with trio.CancelScope(shield=True):
            with trio.move_on_after(CLOSE_DEADLINE):
                for connection in connections:
                    await connection.ended.wait()
            if self._spawned:
                from ..supervisor import kill_marked

                await trio.to_thread.run_sync(partial(kill_marked, self._owner, prefix=True))
