"""``penguin config mcp list|add|remove|test``: the agent's MCP servers (spec/mcp.md M3.3).

Edits ``tools.mcpServers`` of the agent's ``system_config.yaml`` through
:func:`penguin.config.add_mcp_server` and :func:`~penguin.config.remove_mcp_server`
(round-trip YAML: comments, key order and the rest of the file stay), and probes one
server: ``test NAME`` opens an Environment with only that server, connects it as a
session would, and prints its tools and the connect time, or the reason it is
unavailable (exit 1). ``add`` builds the entry from its options and checks it exactly
as the file's entries are checked, so what it writes always loads.

The MCP SDK is loaded only by ``test``; the other three only read and write YAML.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, final

from penguin import config
from penguin._errors import PenguinError
from penguin.config import McpRemoteTransport, McpServerConfig, McpStdioTransport

from ._sandbox import add_sandbox_options

__all__ = ["register"]

Handler = Callable[[argparse.Namespace], int]
Leaf = Callable[..., argparse.ArgumentParser]

_PROG: Final = "penguin config mcp"


@final
class _Refused(PenguinError, ValueError):
    """What the command cannot do; printed as one line, exit 1."""


def register(
    sections: Any, location: argparse.ArgumentParser, *, leaf: Leaf, help_of: Callable[..., Handler]
) -> None:
    """Add ``mcp`` and its four actions to ``penguin config``."""
    parser: argparse.ArgumentParser = sections.add_parser(
        "mcp",
        help="list, add, remove and test the agent's MCP servers",
        description=(
            "The agent's MCP servers (tools.mcpServers in agent_state/system_config.yaml).\n"
            "Their tools are offered to the model as mcp__<server>__<tool>. Comments and\n"
            "hand edits in the file are kept."
        ),
        epilog=(
            "examples:\n"
            "  penguin config mcp add files --command npx --arg=-y "
            "--arg @modelcontextprotocol/server-filesystem --arg .\n"
            "  penguin config mcp add search --url https://example.com/mcp "
            "--header 'Authorization=Bearer TOKEN'\n"
            "  penguin config mcp test files\n"
            "  penguin config mcp list"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=help_of(parser))
    actions = parser.add_subparsers(dest="mcp_action", metavar="ACTION")

    leaf(
        actions,
        "list",
        location,
        help="list the configured servers",
        description=(
            "Print one line per server: its name, its transport, its command or URL, and "
            "(sandboxed) for a local server that runs under the session's sandbox."
        ),
        examples=("penguin config mcp list",),
        action=_list,
    )
    add = leaf(
        actions,
        "add",
        location,
        help="add a server (a local command, or a URL)",
        description=(
            "Append one server to tools.mcpServers. Give --command (a local server speaking "
            "MCP on its standard input and output) or --url (a remote one: Streamable HTTP, "
            "or the legacy SSE transport with --transport sse). An argument that starts "
            "with '-' is given as --arg=-y. The toolset is left as it is: a file without "
            "tools.builtin keeps the default tools."
        ),
        examples=(
            "penguin config mcp add files --command npx --arg=-y "
            "--arg @modelcontextprotocol/server-filesystem --arg .",
            "penguin config mcp add search --url https://example.com/mcp "
            "--header 'Authorization=Bearer TOKEN' --permission r",
        ),
        action=_add,
    )
    add.add_argument("name", metavar="NAME", help="the server's name: letters, digits, _ and -")
    where = add.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--command",
        dest="server_command",  # "command" is the top-level parser's subcommand
        metavar="CMD",
        help="the program of a local (stdio) server",
    )
    where.add_argument("--url", metavar="URL", help="the http(s) URL of a remote server")
    add.add_argument(
        "--arg", dest="args", action="append", default=[], metavar="A", help="an argument"
    )
    add.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="K=V",
        help="a variable for the server's environment (stdio)",
    )
    add.add_argument("--cwd", metavar="DIR", help="its directory (stdio; default: the workspace)")
    add.add_argument(
        "--sandbox",
        action="store_true",
        help="run it under the session's sandbox (stdio; default: unsandboxed, docs/sandbox.md)",
    )
    add.add_argument(
        "--header", action="append", default=[], metavar="K=V", help="an HTTP header (url)"
    )
    add.add_argument(
        "--transport", choices=("http", "sse"), help="with --url: http (default) or sse"
    )
    add.add_argument(
        "--permission",
        choices=("auto", "r", "rw"),
        default="auto",
        help="the tools' permission (auto: r for tools annotated read-only, else rw)",
    )
    add.add_argument("--timeout-ms", type=int, metavar="N", help="time limit of one call")
    add.add_argument(
        "--max-output-length", type=int, metavar="N", help="characters of output shown"
    )
    add.add_argument(
        "--connect-timeout-ms",
        type=int,
        metavar="N",
        default=config.DEFAULT_MCP_CONNECT_TIMEOUT_MS,
        help="time to connect and list its tools (default 10000)",
    )
    remove = leaf(
        actions,
        "remove",
        location,
        help="remove a server",
        description="Remove the server NAME from tools.mcpServers.",
        examples=("penguin config mcp remove files",),
        action=_remove,
    )
    remove.add_argument("name", metavar="NAME")
    test = leaf(
        actions,
        "test",
        location,
        help="connect to a server and list its tools",
        description=(
            "Connect to the server NAME as a session would (within its connectTimeoutMs), "
            "print the time it took and its tools, and exit. Exit status 1, with the "
            "reason, when the server is unavailable. A server whose entry sets sandbox: "
            "true starts under the sandbox penguin run would give a session here (the "
            "project file's [sandbox], else workspace-write, or --sandbox and "
            "--network), named on stderr first."
        ),
        examples=("penguin config mcp test files",),
        action=_test,
    )
    test.add_argument("name", metavar="NAME")
    test.add_argument(
        "--workspace",
        type=Path,
        default=None,
        metavar="DIR",
        help="the directory a stdio server starts in (default: the current directory)",
    )
    add_sandbox_options(test, default="workspace-write")  # for a sandbox: true server


def _system_config(args: argparse.Namespace) -> Path:
    paths = config.AgentPaths(args.root, args.project_id, args.agent_id)
    return paths.system_config


def _servers(args: argparse.Namespace) -> tuple[McpServerConfig, ...]:
    path = _system_config(args)
    if not path.exists():
        return ()
    return config.load_system_config(path).mcp_servers


def _pairs(values: Sequence[str], option: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise _Refused(f"{option} {value!r}: expected KEY=VALUE")
        pairs[key] = rest
    return pairs


def _server_from(args: argparse.Namespace) -> McpServerConfig:
    transport: McpStdioTransport | McpRemoteTransport
    if args.server_command is not None:
        for option, given in (("--header", args.header), ("--transport", args.transport)):
            if given:
                raise _Refused(f"{option} applies only to a server given by --url")
        transport = McpStdioTransport(
            command=args.server_command,
            args=tuple(args.args),
            env=_pairs(args.env, "--env"),
            cwd=args.cwd,
            sandbox=args.sandbox,
        )
    else:
        stdio_only = (
            ("--arg", args.args),
            ("--env", args.env),
            ("--cwd", args.cwd),
            ("--sandbox", args.sandbox),
        )
        for option, given in stdio_only:
            if given:
                raise _Refused(f"{option} applies only to a server given by --command")
        transport = McpRemoteTransport(
            kind=args.transport or "http", url=args.url, headers=_pairs(args.header, "--header")
        )
    server = McpServerConfig(
        name=args.name,
        transport=transport,
        connect_timeout_ms=args.connect_timeout_ms,
        timeout_ms=args.timeout_ms,
        max_output_length=args.max_output_length,
        permission=args.permission,
    )
    try:  # the same checks as an entry in the file gets
        return config.parse_mcp_server(config.mcp_server_entry(server), "the command line")
    except config.ConfigError as error:
        option = (error.field or "").removeprefix("config.")
        raise _Refused(f"{option or 'name'}: {error.reason}") from None


def _describe(server: McpServerConfig) -> str:
    transport = server.transport
    if isinstance(transport, McpStdioTransport):
        command = " ".join([transport.command, *transport.args])
        return f"{command}  (sandboxed)" if transport.sandbox else command
    return transport.url


def _list(args: argparse.Namespace) -> int:
    servers = _servers(args)
    if not servers:
        print(f"No MCP servers are configured ({_system_config(args)}).", file=sys.stderr)
    width = max((len(server.name) for server in servers), default=0)
    for server in servers:
        print(f"{server.name:<{width}}  {server.transport.kind:<5}  {_describe(server)}")
    return 0


def _add(args: argparse.Namespace) -> int:
    server = _server_from(args)
    path = _system_config(args)
    if not path.exists():
        config.dump_default_system_config(path)  # an agent's first use, as a session's
    try:
        config.add_mcp_server(path, server)
    except config.ConfigError as error:
        raise _Refused(error.reason) from None
    print(f"Added MCP server {server.name} ({server.transport.kind}) to {path}.")
    print(f"Try it: penguin config mcp test {server.name}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    path = _system_config(args)
    if not path.exists() or not config.remove_mcp_server(path, args.name):
        raise _Refused(f'no MCP server named "{args.name}" in {path}')
    print(f"Removed MCP server {args.name} from {path}.")
    return 0


def _test(args: argparse.Namespace) -> int:
    import trio

    server = next((s for s in _servers(args) if s.name == args.name), None)
    if server is None:
        raise _Refused(
            f'no MCP server named "{args.name}" in {_system_config(args)} '
            "(penguin config mcp list shows them)"
        )
    workspace = args.workspace if args.workspace is not None else Path.cwd()
    policy = None
    if isinstance(server.transport, McpStdioTransport) and server.transport.sandbox:
        policy = _session_policy(args)
        if policy is None:
            return 1
    elif args.sandbox is not None or args.network is not None:
        raise _Refused(
            f"{server.name} runs unsandboxed (its entry does not set sandbox: true), "
            "so --sandbox and --network do not apply to it"
        )
    code: int = trio.run(_probe, server, workspace, policy)
    return code


def _session_policy(args: argparse.Namespace) -> Any:
    """The policy ``penguin run`` would give a session here, or None after a refusal.

    ``--sandbox`` and ``--network`` count as they do for ``penguin run``.
    """
    import attrs

    from ._sandbox import policy_for, sandbox_line  # the sandbox probe only when needed

    paths = config.AgentPaths(args.root, args.project_id, args.agent_id)
    try:
        project = config.load_project_config(paths.project_config).sandbox
    except config.ConfigError as error:
        raise _Refused(str(error)) from None
    policy = policy_for(args, project, default="workspace-write", prog=_PROG)
    if policy is None:
        return None
    print(sandbox_line(policy), file=sys.stderr)
    return attrs.evolve(policy, data_root=str(paths.root))


async def _probe(server: McpServerConfig, workspace: Path, policy: Any) -> int:
    from penguin.environment import Environment, EnvironmentConfig

    from ._render import sanitize

    env_config = EnvironmentConfig(
        workspace_dir=workspace, tools=[], mcp_servers=[server], sandbox=policy
    )
    async with Environment.open(env_config) as env:
        (result,) = await env.connect_mcp()
        tools = await env.list_tools()
        permissions = {tool.name: env.tool_permission(tool.name) for tool in tools}
    if result.status != "completed":
        reason = sanitize(result.error or "")  # may quote the server's own stderr
        print(f"{_PROG}: {server.name} is unavailable: {reason}", file=sys.stderr)
        return 1
    count = len(tools)
    print(
        f"{server.name}: connected in {result.duration_ms} ms, "
        f"{count} tool{'s' if count != 1 else ''}"
    )
    width = max((len(tool.name) for tool in tools), default=0)
    for tool in tools:
        summary = sanitize(tool.description.strip().split("\n", 1)[0])  # the server's text
        print(f"  {tool.name:<{width}}  {permissions[tool.name]:<2}  {summary}")
    return 0
