"""The edits ``penguin config mcp`` makes to ``tools.mcpServers`` (spec/mcp.md M3.3).

Owns turning an :class:`~penguin.config.McpServerConfig` back into its YAML entry
(the reference spellings: ``connectTimeoutMs``, ``timeoutMs``, ``maxOutputLength``;
only what differs from the defaults is written, ``transport`` only where it cannot be
inferred) and the two edits, appending one server and removing one, on the
round-trip document of ``system_config.yaml``, so the user's comments, key order and
other sections stay as they were. A file without ``tools.builtin`` keeps the default
toolset: adding a server never writes ``builtin``.

What it does not do: validate a hand-written entry (``_mcp`` reads every entry the
same way, whoever wrote it) or connect to a server (the Environment does).
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from pathlib import Path

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from ._errors import ConfigError
from ._files import editing
from ._mcp import DEFAULT_MCP_CONNECT_TIMEOUT_MS, McpServerConfig, McpStdioTransport
from ._system import load_system_config, write_system_config
from ._yaml import round_trip_yaml

__all__ = ["add_mcp_server", "mcp_server_entry", "remove_mcp_server"]


def _scalar(text: str) -> str:
    """``text`` as ruamel writes it, or double-quoted where that would not read back.

    ruamel writes some strings plainly that its own reader rejects or changes: ``:0``
    or ``?x`` in a flow collection (an invalid file), a NEL (U+0085) in a quoted
    scalar (read back as a space). Double quotes escape every such character.
    """
    probe = CommentedMap({text: text})
    probe.fa.set_flow_style()
    document = CommentedMap({"probe": probe})
    stream = io.StringIO()
    round_trip_yaml().dump(document, stream)
    try:
        back = round_trip_yaml().load(stream.getvalue())
        kept = dict(back["probe"]) == {text: text}
    except YAMLError:
        kept = False
    return text if kept else DoubleQuotedScalarString(text)


def _string_map(values: Mapping[str, str]) -> CommentedMap:
    node = CommentedMap({_scalar(key): _scalar(value) for key, value in values.items()})
    node.fa.set_flow_style()
    return node


def mcp_server_entry(server: McpServerConfig) -> CommentedMap:
    """The ``{name, config}`` YAML entry that reads back as ``server``."""
    config = CommentedMap()
    transport = server.transport
    if isinstance(transport, McpStdioTransport):
        config["command"] = _scalar(transport.command)
        if transport.args:
            args = CommentedSeq(_scalar(arg) for arg in transport.args)
            args.fa.set_flow_style()
            config["args"] = args
        if transport.env:
            config["env"] = _string_map(transport.env)
        if transport.cwd is not None:
            config["cwd"] = _scalar(transport.cwd)
        if transport.sandbox:
            config["sandbox"] = True
    else:
        if transport.kind == "sse":
            config["transport"] = "sse"
        config["url"] = _scalar(transport.url)
        if transport.headers:
            config["headers"] = _string_map(transport.headers)
    if server.connect_timeout_ms != DEFAULT_MCP_CONNECT_TIMEOUT_MS:
        config["connectTimeoutMs"] = server.connect_timeout_ms
    if server.timeout_ms is not None:
        config["timeoutMs"] = server.timeout_ms
    if server.max_output_length is not None:
        config["maxOutputLength"] = server.max_output_length
    if server.permission != "auto":
        config["permission"] = server.permission
    entry = CommentedMap()
    entry["name"] = server.name
    entry["config"] = config
    return entry


def _servers_node(path: Path, document: CommentedMap, *, create: bool) -> CommentedSeq | None:
    tools = document.get("tools")
    if tools is None:
        if not create:
            return None
        tools = document["tools"] = CommentedMap()
    if not isinstance(tools, CommentedMap):
        raise ConfigError("tools: expected a mapping; fix it by hand first", path, None, "tools")
    servers = tools.get("mcpServers")
    if servers is None:
        if not create:
            return None
        servers = tools["mcpServers"] = CommentedSeq()
    if not isinstance(servers, CommentedSeq):
        raise ConfigError(
            "expected a list of servers; fix it by hand first", path, None, "tools.mcpServers"
        )
    return servers


def _entry_name(entry: object) -> object:
    return entry.get("name") if isinstance(entry, CommentedMap) else None


def add_mcp_server(path: str | os.PathLike[str], server: McpServerConfig) -> None:
    """Append ``server`` to the file's ``tools.mcpServers`` (created when missing).

    Raises :class:`ConfigError` when an entry of that name is already there (even
    an invalid one), or when the file cannot be read. Blocking.
    """
    file = Path(path)
    with editing(file):
        document = load_system_config(file).document
        servers = _servers_node(file, document, create=True)
        assert servers is not None
        if any(_entry_name(entry) == server.name for entry in servers):
            raise ConfigError(
                f'an MCP server named "{server.name}" is already configured; remove it first '
                f"(penguin config mcp remove {server.name}) or choose another name",
                file,
                None,
                "tools.mcpServers",
            )
        servers.append(mcp_server_entry(server))
        write_system_config(file, document)


def remove_mcp_server(path: str | os.PathLike[str], name: str) -> bool:
    """Remove the entries named ``name``; ``False`` when there was none. Blocking."""
    file = Path(path)
    with editing(file):
        document = load_system_config(file).document
        servers = _servers_node(file, document, create=False)
        if servers is None:
            return False
        kept = [index for index, entry in enumerate(servers) if _entry_name(entry) != name]
        if len(kept) == len(servers):
            return False
        for index in reversed(range(len(servers))):
            if index not in kept:
                del servers[index]
        write_system_config(file, document)
    return True
