"""A host for the MCP watchdog test: it holds a stdio MCP server until it is killed.

``python -m tests.environment.mcp.host`` opens an Environment in the current
directory with the test server, has it start its two children (one in its group, one
that left it), prints ``ready SERVER INSIDE OUTSIDE`` and waits to be killed.
"""

from __future__ import annotations

from pathlib import Path

import trio

import penguin

from .support import call, environment_config, stdio_server


async def main() -> None:
    config = environment_config(Path.cwd(), stdio_server())
    async with penguin.Environment.open(config) as env:
        server = (await call(env, "pid")).output
        children = (await call(env, "children")).output
        print(f"ready {server} {children}", flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main)
