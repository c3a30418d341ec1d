"""Real MCP servers for the tests: the SDK server of ``server.py`` over stdio, HTTP or SSE.

A stdio server is configured as ``python -m tests.environment.mcp.server`` with the
repository on ``PYTHONPATH`` (the Environment starts it in the workspace). An HTTP or
SSE server is a process of its own, started by :class:`HttpServer` (a context
manager), serving on 127.0.0.1 with hypercorn; it is ready once it wrote its port.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import attrs

import penguin
from penguin import protocol as om
from penguin.config import McpRemoteTransport, McpServerConfig, McpStdioTransport

REPO = Path(__file__).resolve().parents[3]
SERVER_MODULE = "tests.environment.mcp.server"
RAW_MODULE = "tests.environment.mcp.raw_server"


def stdio_server(
    name: str = "s",
    *,
    env: Mapping[str, str] | None = None,
    module: str = SERVER_MODULE,
    args: tuple[str, ...] = (),
    **options: Any,
) -> McpServerConfig:
    """The test server over stdio, as an entry of ``tools.mcpServers``."""
    transport = McpStdioTransport(
        command=sys.executable,
        args=("-m", module, *args),
        env={"PYTHONPATH": str(REPO), **(env or {})},
    )
    return McpServerConfig(name=name, transport=transport, **options)


def writing_server(target: Path, *, sandbox: bool, name: str = "s") -> McpServerConfig:
    """The test server, started by a shell that first tries to write ``target``."""
    script = f'echo x > {target} 2>/dev/null; exec "{sys.executable}" -m {SERVER_MODULE}'
    transport = McpStdioTransport(
        command="sh", args=("-c", script), env={"PYTHONPATH": str(REPO)}, sandbox=sandbox
    )
    return McpServerConfig(name=name, transport=transport)


def command_server(name: str, command: str, *args: str, **options: Any) -> McpServerConfig:
    """Any command as a stdio server entry."""
    transport = McpStdioTransport(command=command, args=args)
    return McpServerConfig(name=name, transport=transport, **options)


def remote_server(
    name: str, url: str, kind: Literal["http", "sse"] = "http", **options: Any
) -> McpServerConfig:
    """An HTTP or SSE server entry."""
    transport = McpRemoteTransport(kind=kind, url=url, headers={"X-Test": "yes"})
    return McpServerConfig(name=name, transport=transport, **options)


@attrs.define
class HttpServer:
    """A running HTTP (or SSE) test server: its process and its URL."""

    process: subprocess.Popen[bytes]
    url: str

    def stop(self) -> None:
        """Kill it (a server that died, for the reconnect tests)."""
        self.process.kill()
        self.process.wait(timeout=10)


@contextmanager
def http_server(tmp_path: Path, kind: Literal["http", "sse"] = "http") -> Iterator[HttpServer]:
    """Start the test server over ``kind``; kill it when the block ends."""
    port_file = tmp_path / f"port-{time.monotonic_ns()}"
    process = subprocess.Popen(
        [sys.executable, "-m", SERVER_MODULE, f"--{kind}", str(port_file)], cwd=REPO
    )
    try:
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text()):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the {kind} test server did not start")
            time.sleep(0.02)
        port = port_file.read_text()
        path = "/mcp" if kind == "http" else "/sse"
        yield HttpServer(process, f"http://127.0.0.1:{port}{path}")
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def environment_config(
    workspace: Path, *servers: McpServerConfig, **options: Any
) -> penguin.EnvironmentConfig:
    """An Environment with no builtin tools and ``servers``."""
    options.setdefault("tools", [])
    return penguin.EnvironmentConfig(workspace_dir=workspace, mcp_servers=servers, **options)


async def call(
    env: penguin.Environment, name: str, arguments: str = "{}", *, server: str = "s"
) -> om.ToolCallOutputPayload:
    """Call ``mcp__<server>__<name>`` and return the complete output's payload."""
    message = await env.call_tool(om.tool_call(f"mcp__{server}__{name}", arguments, "call_1"))
    return message.payload
