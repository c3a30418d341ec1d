"""A real MCP server for the tests, written with the SDK's low-level server API.

Run it over stdio with ``python -m tests.environment.mcp.server`` (the tests put the
repository on ``PYTHONPATH``), or over Streamable HTTP with ``--http PORT_FILE``: it
then serves on 127.0.0.1 with hypercorn's Trio worker, on a free port it writes to
PORT_FILE once it listens. ``--sse PORT_FILE`` serves the legacy HTTP+SSE transport
the same way. Both run on Trio.

Its tools cover every result kind and every fault the MCP client must survive: text,
images (a small one and one over the limit), audio, resources, structured content,
``isError``, a protocol error, a flood of output, a call that hangs until cancelled
(it counts the cancellations it received), a crash in the middle of a call, and a
call that leaves children behind (one in the server's group, one that left it).
``MCP_TEST_EXTRA_TOOLS=1`` adds a tool whose name is invalid for penguin. At start,
``MCP_TEST_TOUCH`` names a file it creates, ``MCP_TEST_WAIT_FOR`` one it waits for
before serving (two servers that wait for each other prove they start in parallel),
and ``MCP_TEST_ONCE`` one that lets it start only once (it exits 1 when the file is
already there: a reconnect then fails).
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import trio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

# A 1x1 transparent PNG.
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4"
        "890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
    )
).decode()

_state: dict[str, int] = {"calls": 0, "hangs": 0, "cancelled": 0}


def _tool(name: str, description: str, read_only: bool | None = None, **props: Any) -> types.Tool:
    annotations = None if read_only is None else types.ToolAnnotations(read_only_hint=read_only)
    return types.Tool(
        name=name,
        description=description,
        input_schema={
            "type": "object",
            "properties": {key: {"type": kind} for key, kind in props.items()},
        },
        annotations=annotations,
    )


TOOLS = [
    _tool("echo", "Echo the text back.", read_only=True, text="string"),
    _tool("write_note", "Pretend to write a note.", text="string"),
    _tool("image", "Text and a small image."),
    _tool("huge_image", "An image over the limit."),
    _tool("audio", "An audio clip."),
    _tool("resources", "Embedded and linked resources."),
    _tool("structured", "Structured content only."),
    _tool("structured_with_text", "Structured content and text."),
    _tool("fail", "A tool result with isError."),
    _tool("protocol_error", "Answers with a JSON-RPC error."),
    _tool("empty", "No content at all."),
    _tool("flood", "A lot of text.", read_only=True, chars="integer"),
    _tool("hang", "Waits until cancelled.", read_only=False, seconds="number"),
    _tool("stats", "Calls and cancellations seen so far.", read_only=True),
    _tool("crash", "Exits in the middle of the call."),
    _tool("children", "Starts children that outlive the call."),
    _tool("pid", "The server's process id.", read_only=True),
    _tool("environ", "A variable of its environment, and its directory.", variable="string"),
]


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    tools = list(TOOLS)
    if os.environ.get("MCP_TEST_EXTRA_TOOLS"):
        tools.append(_tool("bad name!", "A name penguin cannot offer."))
        tools.append(_tool("x" * 130, "A name too long for penguin."))
    return types.ListToolsResult(tools=tools)


def _text(*texts: str) -> list[Any]:
    return [types.TextContent(type="text", text=text) for text in texts]


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    _state["calls"] += 1
    args = params.arguments or {}
    name = params.name
    if name == "echo":
        return types.CallToolResult(content=_text(str(args.get("text", ""))))
    if name == "write_note":
        return types.CallToolResult(content=_text("noted"))
    if name == "image":
        image = types.ImageContent(type="image", data=PNG, mime_type="image/png")
        return types.CallToolResult(content=[*_text("a picture:"), image])
    if name == "huge_image":
        data = base64.b64encode(b"\0" * (6 * 1024 * 1024)).decode()
        image = types.ImageContent(type="image", data=data, mime_type="image/png")
        return types.CallToolResult(content=[image])
    if name == "audio":
        clip = types.AudioContent(type="audio", data="AAAA", mime_type="audio/wav")
        return types.CallToolResult(content=[*_text("listen:"), clip])
    if name == "resources":
        text = types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(uri="file:///notes.txt", text="the notes"),
        )
        blob = types.EmbeddedResource(
            type="resource",
            resource=types.BlobResourceContents(uri="file:///data.bin", blob="AAAA"),
        )
        link = types.ResourceLink(type="resource_link", uri="https://example.com/doc", name="doc")
        return types.CallToolResult(content=[text, blob, link])
    if name == "structured":
        return types.CallToolResult(content=[], structured_content={"answer": 42, "ok": True})
    if name == "structured_with_text":
        return types.CallToolResult(content=_text("forty-two"), structured_content={"answer": 42})
    if name == "fail":
        return types.CallToolResult(content=_text("it broke"), is_error=True)
    if name == "protocol_error":
        raise MCPError(code=types.INVALID_PARAMS, message="no such thing")
    if name == "empty":
        return types.CallToolResult(content=[])
    if name == "flood":
        return types.CallToolResult(content=_text("x" * int(args.get("chars", 100_000))))
    if name == "hang":
        _state["hangs"] += 1
        try:
            await anyio.sleep(float(args.get("seconds", 3600)))
        except anyio.get_cancelled_exc_class():
            _state["cancelled"] += 1
            raise
        return types.CallToolResult(content=_text("woke up"))
    if name == "stats":
        return types.CallToolResult(
            content=_text(" ".join(f"{key}={value}" for key, value in _state.items()))
        )
    if name == "crash":
        sys.stderr.write("crashing on purpose\n")
        sys.stderr.flush()
        os._exit(3)
    if name == "children":
        inside = subprocess.Popen(["sleep", "300"], stdout=subprocess.DEVNULL)  # noqa: ASYNC220
        outside = subprocess.Popen(  # noqa: ASYNC220
            ["sleep", "301"], stdout=subprocess.DEVNULL, start_new_session=True
        )
        return types.CallToolResult(content=_text(f"{inside.pid} {outside.pid}"))
    if name == "pid":
        return types.CallToolResult(content=_text(str(os.getpid())))
    if name == "environ":
        value = os.environ.get(str(args.get("variable", "")), "<unset>")
        return types.CallToolResult(content=_text(value, os.getcwd()))
    raise MCPError(code=types.METHOD_NOT_FOUND, message=f"unknown tool {params.name}")


def make_server() -> Server[Any]:
    return Server("penguin-test", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio() -> None:
    server = make_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _sse_app(server: Server[Any]) -> Any:
    from mcp.server.sse import SseServerTransport
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    sse = SseServerTransport("/messages/")

    async def handle_sse(request: Any) -> Response:
        async with sse.connect_sse(request.scope, request.receive, request._send) as streams:
            await server.run(streams[0], streams[1], server.create_initialization_options())
        return Response()

    return Starlette(
        routes=[
            Route("/sse", endpoint=handle_sse, methods=["GET"]),
            Mount("/messages/", app=sse.handle_post_message),
        ]
    )


async def serve_http(port_file: Path, *, sse: bool) -> None:
    import hypercorn
    from hypercorn.trio import serve

    server = make_server()
    app = _sse_app(server) if sse else server.streamable_http_app(host="127.0.0.1")
    config = hypercorn.Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(serve, app, config)
        port = int(binds[0].rsplit(":", 1)[1])
        await trio.Path(port_file).write_text(str(port))
        await trio.sleep_forever()


def _start_up() -> None:
    once = os.environ.get("MCP_TEST_ONCE")
    if once:
        if os.path.exists(once):
            sys.stderr.write("refusing to start twice\n")
            raise SystemExit(1)
        Path(once).touch()
    touch = os.environ.get("MCP_TEST_TOUCH")
    if touch:
        Path(touch).touch()
    wait_for = os.environ.get("MCP_TEST_WAIT_FOR")
    while wait_for and not os.path.exists(wait_for):
        time.sleep(0.01)


def main() -> None:
    _start_up()
    if len(sys.argv) == 3 and sys.argv[1] in ("--http", "--sse"):
        trio.run(partial(serve_http, Path(sys.argv[2]), sse=sys.argv[1] == "--sse"))
    else:
        anyio.run(serve_stdio, backend="trio")


if __name__ == "__main__":
    main()
