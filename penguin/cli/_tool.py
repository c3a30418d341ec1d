"""``penguin tool NAME [JSON_ARGS] [--workspace DIR]``: one tool call, no model.

The call goes through a real Environment, so it gets exactly what a model would get:
the same framing, limits, notes and error texts. MCP tools (``mcp__<server>__<tool>``)
are those of the agent's ``system_config.yaml`` (``--root``, ``--project-id``,
``--agent-id``): a call connects only the server it names, ``--list`` connects them
all to show their tools. A builtin tool's call never reads the agent's files.
The output is streamed to stdout
as it arrives; the exit code is 0 when the call ended ``completed`` and 1 otherwise.
Ctrl-C interrupts the call the way a user interrupt does (the tool is told, the
output ends with ``[interrupted: tool aborted by user]``); a second Ctrl-C stops at
once.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from functools import partial
from pathlib import Path
from typing import TextIO

import trio

from penguin import protocol as om
from penguin._concurrency import collapse_single
from penguin._errors import SandboxUnavailableError
from penguin.config import (
    DEFAULT_AGENT_ID,
    DEFAULT_PROJECT_ID,
    AgentPaths,
    ConfigError,
    McpServerConfig,
    default_tools,
    load_system_config,
)
from penguin.environment import Environment, EnvironmentConfig, WorkspaceError
from penguin.environment.sandbox import SandboxPolicy

from ._sandbox import add_sandbox_options, policy_for
from ._signals import Controls

__all__ = ["configure", "run_tool"]


def configure(parser: argparse.ArgumentParser) -> None:
    """Fill in the ``tool`` subcommand's parser (``penguin tool --help``)."""
    parser.description = (
        "Run one tool call through a real Environment and stream its output. "
        "Exit status: 0 when the call completed, 1 otherwise."
    )
    parser.epilog = (
        "examples:\n"
        '  penguin tool read_file \'{"file_path": "README.md", "limit": 20}\'\n'
        '  penguin tool write_file \'{"file_path": "notes/todo.txt", "content": "hi\\n"}\'\n'
        '  echo \'{"file_path": "a.txt"}\' | penguin tool read_file -\n'
        "  penguin tool --list\n"
        '  penguin tool mcp__files__read_text_file \'{"path": "README.md"}\''
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("name", nargs="?", metavar="NAME", help="the tool to call")
    parser.add_argument(
        "arguments",
        nargs="?",
        default="{}",
        metavar="JSON_ARGS",
        help="the call's arguments as a JSON object (default {}); '-' reads them from stdin",
    )
    parser.add_argument(
        "--workspace",
        type=Path,
        default=Path.cwd(),
        metavar="DIR",
        help="the workspace relative paths resolve against (default: the current directory)",
    )
    parser.add_argument(
        "--scratchpad",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep the full output of truncated calls under DIR/truncated-tool-output/",
    )
    parser.add_argument(
        "--list", action="store_true", help="list the tools this Environment offers and exit"
    )
    agent = parser.add_argument_group("whose MCP servers (tools named mcp__<server>__<tool>)")
    agent.add_argument(
        "--root", type=Path, default=None, metavar="DIR", help="data root (default: $PENGUIN_HOME)"
    )
    agent.add_argument("--project-id", default=DEFAULT_PROJECT_ID, metavar="ID")
    agent.add_argument("--agent-id", default=DEFAULT_AGENT_ID, metavar="ID")
    add_sandbox_options(parser, default="off")
    parser.set_defaults(handler=_main)


def _mcp_servers(args: argparse.Namespace, name: str | None) -> tuple[McpServerConfig, ...]:
    """The agent's MCP servers ``name`` may belong to (all of them for ``None``)."""
    if name is not None and not name.startswith("mcp__"):
        return ()
    path = AgentPaths(args.root, args.project_id, args.agent_id).system_config
    if not path.exists():
        return ()
    servers = load_system_config(path).mcp_servers
    if name is None:
        return servers
    return tuple(server for server in servers if name.startswith(f"mcp__{server.name}__"))


def _main(args: argparse.Namespace) -> int:
    if not args.list and args.name is None:
        print("penguin tool: give a tool NAME (or --list to see them)", file=sys.stderr)
        return 1
    try:
        servers = _mcp_servers(args, None if args.list else args.name)
    except ConfigError as exc:
        print(f"penguin tool: {exc}", file=sys.stderr)
        return 1
    if args.list:
        return trio.run(_list_tools, args.workspace, servers, sys.stdout)
    policy = None
    if args.sandbox is not None or args.network is not None:
        policy = policy_for(args, None, default="off", prog="penguin tool")
        if policy is None:
            return 1
    raw = sys.stdin.read() if args.arguments == "-" else args.arguments
    return trio.run(
        partial(run_tool, mcp_servers=servers, sandbox=policy),
        args.name,
        raw,
        args.workspace,
        args.scratchpad,
        sys.stdout,
    )


async def _list_tools(workspace: Path, servers: tuple[McpServerConfig, ...], out: TextIO) -> int:
    from ._render import sanitize  # here: a tool call itself loads no renderer (9.7)

    config = EnvironmentConfig(workspace_dir=workspace, mcp_servers=servers)
    try:
        async with Environment.open(config) as env:
            tools = await env.list_tools()
    except WorkspaceError as exc:
        print(f"penguin tool: {exc}", file=sys.stderr)
        return 1
    width = max((len(t.name) for t in tools), default=0)
    for tool in tools:
        summary = sanitize(tool.description.strip().split("\n", 1)[0])  # a server's text
        out.write(f"{tool.name:<{width}}  {summary}\n")
    return 0


async def run_tool(
    name: str,
    arguments: str,
    workspace: Path,
    scratchpad: Path | None,
    out: TextIO,
    *,
    mcp_servers: tuple[McpServerConfig, ...] = (),
    sandbox: SandboxPolicy | None = None,
) -> int:
    """Run one call and stream it to ``out``; return the exit code.

    ``mcp_servers`` are the servers an ``mcp__`` name may belong to (connected first);
    ``sandbox`` the policy the call runs under (``None``: none).
    """
    call = om.tool_call(name, arguments, f"cli-{secrets.token_hex(4)}")
    # Only the tool being called: the others would cost start-up and serve no one (an
    # Environment with exec_command resolves the login environment as it opens). An
    # unknown name gets the Environment's own "Unknown tool" answer all the same.
    entries = [entry for entry in default_tools() if entry.name == name]
    config = EnvironmentConfig(
        workspace_dir=workspace,
        scratchpad_dir=scratchpad,
        tools=entries,
        mcp_servers=mcp_servers,
        sandbox=sandbox,
    )
    final: om.ToolCallOutputPayload | None = None  # stays None after a hard stop
    try:
        with collapse_single():
            async with trio.open_nursery() as nursery:
                controls = Controls(nursery)
                nursery.start_soon(controls.watch_signals)
                async with Environment.open(config) as env:
                    final = await _stream(env, call, controls.interrupt, out)
                nursery.cancel_scope.cancel()
    except WorkspaceError as exc:
        print(f"penguin tool: {exc}", file=sys.stderr)
        return 1
    except SandboxUnavailableError as exc:
        print(exc, file=sys.stderr)
        return 1
    if final is None:
        return 1
    if final.images:
        count = len(final.images)
        print(f"[{count} image{'s' if count != 1 else ''} returned]", file=sys.stderr)
    return 0 if final.stop_reason == "completed" else 1


async def _stream(
    env: Environment,
    call: om.OmniMessage[om.ToolCallPayload],
    interrupt: trio.Event,
    out: TextIO,
) -> om.ToolCallOutputPayload | None:
    last = "\n"
    final: om.ToolCallOutputPayload | None = None
    async with env.execute_tool(call, interrupt=interrupt) as stream:
        async for message in stream:
            payload = message.payload
            if message.origin:
                continue
            if isinstance(payload, om.PartialToolCallOutputPayload) and payload.output:
                out.write(payload.output)
                out.flush()
                last = payload.output[-1]
            elif isinstance(payload, om.ToolCallOutputPayload):
                final = payload
    if last != "\n":
        out.write("\n")
        out.flush()
    return final
