"""MCP server entries of ``system_config.yaml`` (``tools.mcpServers``, reference 6.5).

Owns the typed form of a server entry (:class:`McpServerConfig` with a
:class:`McpStdioTransport` or :class:`McpRemoteTransport`) and the reader that
validates ``tools.mcpServers``. It does not connect to anything (the
Environment does, ``penguin.environment.mcp``); ``_mcp_edits`` writes entries back.

Invariant: a broken MCP entry never stops an agent from starting. Each invalid
entry is skipped with one warning on the ``penguin`` logger that names the file,
the line and the field, and the valid entries around it are kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, Literal, TypeAlias, cast, final
from urllib.parse import urlsplit

import attrs

from penguin._log import logger as _logger

from ._errors import ConfigError
from ._yaml import (
    Located,
    describe_value,
    expect_bool,
    expect_choice,
    expect_int,
    expect_list,
    expect_mapping,
    expect_str,
    reject_unknown_keys,
)

__all__ = [
    "DEFAULT_MCP_CONNECT_TIMEOUT_MS",
    "McpPermission",
    "McpRemoteTransport",
    "McpServerConfig",
    "McpStdioTransport",
    "parse_mcp_server",
    "parse_mcp_servers",
]

McpPermission: TypeAlias = Literal["auto", "r", "rw"]

DEFAULT_MCP_CONNECT_TIMEOUT_MS: Final = 10_000

_SERVER_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_ENTRY_KEYS: Final = ("name", "config")
_SHARED_KEYS: Final = (
    "transport",
    "connectTimeoutMs",
    "timeoutMs",
    "maxOutputLength",
    "permission",
)
_STDIO_KEYS: Final = ("command", "args", "env", "cwd", "sandbox")
_REMOTE_KEYS: Final = ("url", "headers")


@final
@attrs.frozen(kw_only=True)
class McpStdioTransport:
    """A local server started as a subprocess speaking MCP over stdin/stdout.

    ``cwd=None`` means the session's workspace. ``sandbox`` runs it under the
    session's sandbox policy (spec/sandbox.md X2.5; off unless the entry says so).
    """

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict)
    cwd: str | None = None
    sandbox: bool = False
    kind: Literal["stdio"] = attrs.field(default="stdio", init=False)


@final
@attrs.frozen(kw_only=True)
class McpRemoteTransport:
    """A server reached over HTTP: streamable HTTP (``http``) or server-sent events (``sse``)."""

    kind: Literal["http", "sse"]
    url: str
    headers: Mapping[str, str] = attrs.field(factory=dict)


@final
@attrs.frozen(kw_only=True)
class McpServerConfig:
    """One ``tools.mcpServers`` entry; its tools are named ``mcp__<name>__<tool>``.

    ``timeout_ms`` and ``max_output_length`` of None mean the per-call defaults
    (reference 1.5); ``permission="auto"`` leaves the permission to the server's tool
    annotations.
    """

    name: str
    transport: McpStdioTransport | McpRemoteTransport
    connect_timeout_ms: int = DEFAULT_MCP_CONNECT_TIMEOUT_MS
    timeout_ms: int | None = None
    max_output_length: int | None = None
    permission: McpPermission = "auto"


def _string_map(node: Located) -> dict[str, str]:
    expect_mapping(node)
    result: dict[str, str] = {}
    for key, child in node.children():
        if not isinstance(key, str):
            child.fail(f"keys must be strings, got {describe_value(key)}")
        if not isinstance(child.value, str):
            child.fail(f"expected a string (quote numbers), got {describe_value(child.value)}")
        result[str(key)] = str(child.value)
    return result


def _optional_int(config: Located, key: str) -> int | None:
    if key not in config.value or config.value[key] is None:
        return None
    return expect_int(config.child(key))


def _transport(config: Located) -> McpStdioTransport | McpRemoteTransport:
    values = config.value
    if "transport" in values and values["transport"] is not None:
        kind = expect_choice(config.child("transport"), ("stdio", "http", "sse"))
    elif "command" in values and "url" in values:
        config.fail(
            'has both "command" and "url": give "command" for a local (stdio) server '
            'or "url" for a remote one, not both'
        )
    elif "command" in values:
        kind = "stdio"
    elif "url" in values:
        kind = "http"
    else:
        config.fail('needs "command" (a local stdio server) or "url" (a remote http server)')

    if kind == "stdio":
        for key in _REMOTE_KEYS:
            if key in values:
                config.child(key).fail("applies only to http and sse servers")
        if "command" not in values:
            config.fail('a stdio server needs "command"')
        args: tuple[str, ...] = ()
        if values.get("args") is not None:
            args = tuple(
                expect_str(item, blank_ok=True)
                for item in expect_list(config.child("args")).items()
            )
        env = _string_map(config.child("env")) if values.get("env") is not None else {}
        cwd = expect_str(config.child("cwd")) if values.get("cwd") is not None else None
        boxed = values.get("sandbox") is not None and expect_bool(config.child("sandbox"))
        return McpStdioTransport(
            command=expect_str(config.child("command")), args=args, env=env, cwd=cwd, sandbox=boxed
        )

    for key in _STDIO_KEYS:
        if key in values:
            config.child(key).fail("applies only to stdio servers")
    if "url" not in values:
        config.fail(f'an {kind} server needs "url"')
    url_node = config.child("url")
    url = expect_str(url_node)
    try:
        parts = urlsplit(url)
        valid = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
    except ValueError:  # e.g. an unclosed IPv6 bracket or a bad port
        valid = False
    if not valid:
        url_node.fail(f"expected an http:// or https:// URL, got {describe_value(url)}")
    headers = _string_map(config.child("headers")) if values.get("headers") is not None else {}
    return McpRemoteTransport(kind=cast(Literal["http", "sse"], kind), url=url, headers=headers)


def _server(entry: Located) -> McpServerConfig:
    expect_mapping(entry, "a mapping with name and config")
    reject_unknown_keys(entry, _ENTRY_KEYS)
    if "name" not in entry.value:
        entry.fail('missing "name"')
    name_node = entry.child("name")
    name = expect_str(name_node)
    if not _SERVER_NAME.fullmatch(name):
        name_node.fail(
            f"invalid server name {describe_value(name)}: use letters, digits, _ and -, "
            "starting with a letter or digit"
        )
    if "config" not in entry.value:
        entry.fail('missing "config"')
    config = expect_mapping(entry.child("config"))
    reject_unknown_keys(config, (*_SHARED_KEYS, *_STDIO_KEYS, *_REMOTE_KEYS))
    transport = _transport(config)

    connect_timeout_ms = _optional_int(config, "connectTimeoutMs")
    if connect_timeout_ms is not None and connect_timeout_ms <= 0:
        config.child("connectTimeoutMs").fail(
            f"expected a positive number of milliseconds, got {connect_timeout_ms}"
        )
    permission: McpPermission = "auto"
    if config.value.get("permission") is not None:
        permission = cast(
            McpPermission, expect_choice(config.child("permission"), ("auto", "r", "rw"))
        )
    return McpServerConfig(
        name=name,
        transport=transport,
        connect_timeout_ms=connect_timeout_ms or DEFAULT_MCP_CONNECT_TIMEOUT_MS,
        timeout_ms=_optional_int(config, "timeoutMs"),
        max_output_length=_optional_int(config, "maxOutputLength"),
        permission=permission,
    )


def parse_mcp_server(entry: Mapping[str, object], source: str) -> McpServerConfig:
    """One ``{name, config}`` entry, checked as a file's entries are.

    For an entry that does not come from a file (``penguin config mcp add`` builds
    one from its options): ``source`` names where it came from. Raises
    :class:`ConfigError` whose ``field`` is the key at fault (``config.url``...).
    """
    return _server(Located(value=entry, field="", line=1, path=source))


def _warn(error: ConfigError, consequence: str = "this MCP server entry is skipped") -> None:
    _logger.warning("%s; %s", error, consequence)


def parse_mcp_servers(node: Located) -> tuple[McpServerConfig, ...]:
    """The valid servers of a ``tools.mcpServers`` value, in order.

    Invalid entries, and later entries reusing a name, are skipped with a warning.
    A value that is not a list yields no servers (and one warning).
    """
    if node.value is None:
        return ()
    if not isinstance(node.value, list):
        reason = f"expected a list of servers, got {describe_value(node.value)}"
        _warn(ConfigError(reason, node.path, node.line, node.field), "no MCP servers are used")
        return ()
    servers: list[McpServerConfig] = []
    for entry in node.items():
        try:
            server = _server(entry)
        except ConfigError as error:
            _warn(error)
            continue
        if any(known.name == server.name for known in servers):
            _warn(
                ConfigError(
                    f'duplicate server name "{server.name}" (tool names would collide)',
                    entry.path,
                    entry.child("name").line,
                    f"{entry.field}.name",
                )
            )
            continue
        servers.append(server)
    return tuple(servers)
