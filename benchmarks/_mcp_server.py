"""The MCP server of ``benchmarks/mcp.py``: one ``echo`` tool, the SDK's low-level API.

Run as ``python -m benchmarks._mcp_server`` for stdio (on Trio, like penguin), or with
``--http PORT_FILE`` for Streamable HTTP on 127.0.0.1, with hypercorn's Trio worker, on
a free port it writes to ``PORT_FILE``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import trio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

ECHO = types.Tool(
    name="echo",
    description="Echo the text back.",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
    annotations=types.ToolAnnotations(read_only_hint=True),
)


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[ECHO])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    text = str((params.arguments or {}).get("text", ""))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def _server() -> Server[Any]:
    return Server("bench", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    server = _server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_http(port_file: Path) -> None:
    import hypercorn
    from hypercorn.trio import serve

    config = hypercorn.Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    app = _server().streamable_http_app(host="127.0.0.1")
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(serve, app, config)
        await trio.Path(port_file).write_text(binds[0].rsplit(":", 1)[1])
        await trio.sleep_forever()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        trio.run(serve_http, Path(sys.argv[2]))
    else:
        anyio.run(main, backend="trio")
