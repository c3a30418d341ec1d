"""Reference 6.5: ``tools.mcpServers`` entries are parsed and validated; bad ones are skipped."""

from __future__ import annotations

import logging
import textwrap
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from penguin.config import (
    DEFAULT_MCP_CONNECT_TIMEOUT_MS,
    McpRemoteTransport,
    McpServerConfig,
    McpStdioTransport,
    add_mcp_server,
    load_system_config,
)

CONFIG = "system_config.yaml"


def load_servers(tmp_path: Path, servers: str) -> tuple[McpServerConfig, ...]:
    path = tmp_path / CONFIG
    body = textwrap.indent(textwrap.dedent(servers), "    ")
    path.write_text(f"tools:\n  mcpServers:\n{body}", encoding="utf-8")
    return load_system_config(path).mcp_servers


def test_6_5_stdio_server_inferred_from_command(tmp_path: Path) -> None:
    servers = load_servers(
        tmp_path,
        """\
        - name: files
          config:
            command: npx
            args: ["-y", "server-filesystem", "."]
            env: {TOKEN: abc, PORT: "8080"}
            cwd: /srv
        """,
    )
    assert servers == (
        McpServerConfig(
            name="files",
            transport=McpStdioTransport(
                command="npx",
                args=("-y", "server-filesystem", "."),
                env={"TOKEN": "abc", "PORT": "8080"},
                cwd="/srv",
            ),
        ),
    )
    assert servers[0].transport.kind == "stdio"


def test_6_5_stdio_defaults(tmp_path: Path) -> None:
    (server,) = load_servers(tmp_path, "- {name: a, config: {command: srv}}\n")
    assert server.transport == McpStdioTransport(command="srv")
    assert isinstance(server.transport, McpStdioTransport)
    assert server.transport.cwd is None  # the workspace
    assert server.connect_timeout_ms == DEFAULT_MCP_CONNECT_TIMEOUT_MS == 10000
    assert server.timeout_ms is None
    assert server.max_output_length is None
    assert server.permission == "auto"


def test_6_5_http_inferred_from_url_and_sse_explicit(tmp_path: Path) -> None:
    servers = load_servers(
        tmp_path,
        """\
        - name: search
          config:
            url: https://example.com/mcp
            headers: {Authorization: Bearer x}
        - name: events
          config: {transport: sse, url: "http://127.0.0.1:9000/sse"}
        - name: explicit_http
          config: {transport: http, url: "HTTPS://example.com"}
        """,
    )
    assert [server.transport for server in servers] == [
        McpRemoteTransport(
            kind="http", url="https://example.com/mcp", headers={"Authorization": "Bearer x"}
        ),
        McpRemoteTransport(kind="sse", url="http://127.0.0.1:9000/sse"),
        McpRemoteTransport(kind="http", url="HTTPS://example.com"),
    ]


def test_6_5_shared_settings(tmp_path: Path) -> None:
    (server,) = load_servers(
        tmp_path,
        """\
        - name: s-1
          config:
            command: srv
            connectTimeoutMs: 2500
            timeoutMs: 0
            maxOutputLength: 9000
            permission: r
        """,
    )
    assert server.connect_timeout_ms == 2500
    assert server.timeout_ms == 0
    assert server.max_output_length == 9000
    assert server.permission == "r"


def test_6_5_empty_or_null_list_means_no_servers(tmp_path: Path) -> None:
    path = tmp_path / CONFIG
    path.write_text("tools:\n  mcpServers:\n", encoding="utf-8")
    assert load_system_config(path).mcp_servers == ()
    path.write_text("tools:\n  mcpServers: []\n", encoding="utf-8")
    assert load_system_config(path).mcp_servers == ()


INVALID: list[tuple[str, str, int, str, str]] = [
    # (id, entry, line of the problem, field, fragment)
    (
        "name-chars",
        "- {name: my server, config: {command: x}}",
        4,
        "tools.mcpServers[1].name",
        "invalid server name",
    ),
    (
        "name-leading-dash",
        "- {name: -x, config: {command: x}}",
        4,
        "tools.mcpServers[1].name",
        "invalid server name",
    ),
    ("name-missing", "- {config: {command: x}}", 4, "tools.mcpServers[1]", 'missing "name"'),
    ("config-missing", "- {name: x}", 4, "tools.mcpServers[1]", 'missing "config"'),
    (
        "config-not-mapping",
        "- {name: x, config: npx}",
        4,
        "tools.mcpServers[1].config",
        "expected a mapping",
    ),
    ("entry-not-mapping", "- just-a-name", 4, "tools.mcpServers[1]", "expected a mapping"),
    (
        "entry-unknown-key",
        "- {name: x, config: {command: y}, enabled: true}",
        4,
        "tools.mcpServers[1].enabled",
        "unknown key",
    ),
    (
        "neither",
        "- {name: x, config: {args: [a]}}",
        4,
        "tools.mcpServers[1].config",
        'needs "command"',
    ),
    (
        "both",
        "- {name: x, config: {command: a, url: 'http://h'}}",
        4,
        "tools.mcpServers[1].config",
        "not both",
    ),
    (
        "bad-transport",
        "- {name: x, config: {transport: ws, url: 'http://h'}}",
        4,
        "tools.mcpServers[1].config.transport",
        'expected "stdio" or "http" or "sse", got "ws"',
    ),
    (
        "sse-without-url",
        "- {name: x, config: {transport: sse}}",
        4,
        "tools.mcpServers[1].config",
        'an sse server needs "url"',
    ),
    (
        "stdio-with-url",
        "- {name: x, config: {transport: stdio, url: 'http://h'}}",
        4,
        "tools.mcpServers[1].config.url",
        "applies only to http and sse",
    ),
    (
        "http-with-args",
        "- {name: x, config: {url: 'http://h', args: []}}",
        4,
        "tools.mcpServers[1].config.args",
        "applies only to stdio",
    ),
    (
        "url-scheme",
        "- {name: x, config: {url: 'ftp://h/x'}}",
        4,
        "tools.mcpServers[1].config.url",
        "expected an http:// or https:// URL",
    ),
    (
        "url-broken-ipv6",
        "- {name: x, config: {url: 'http://[::1/mcp'}}",
        4,
        "tools.mcpServers[1].config.url",
        "expected an http:// or https:// URL",
    ),
    (
        "url-no-host",
        "- {name: x, config: {url: 'http://'}}",
        4,
        "tools.mcpServers[1].config.url",
        "expected an http:// or https:// URL",
    ),
    (
        "command-blank",
        "- {name: x, config: {command: ''}}",
        4,
        "tools.mcpServers[1].config.command",
        "empty",
    ),
    (
        "args-not-list",
        "- {name: x, config: {command: a, args: -v}}",
        4,
        "tools.mcpServers[1].config.args",
        "expected a list",
    ),
    (
        "args-not-strings",
        "- {name: x, config: {command: a, args: [1]}}",
        4,
        "tools.mcpServers[1].config.args[0]",
        "expected a string, got 1",
    ),
    (
        "env-number",
        "- {name: x, config: {command: a, env: {PORT: 80}}}",
        4,
        "tools.mcpServers[1].config.env.PORT",
        "quote numbers",
    ),
    (
        "headers-not-mapping",
        "- {name: x, config: {url: 'http://h', headers: [a]}}",
        4,
        "tools.mcpServers[1].config.headers",
        "expected a mapping",
    ),
    (
        "connect-timeout-text",
        "- {name: x, config: {command: a, connectTimeoutMs: soon}}",
        4,
        "tools.mcpServers[1].config.connectTimeoutMs",
        'expected an integer, got "soon"',
    ),
    (
        "connect-timeout-zero",
        "- {name: x, config: {command: a, connectTimeoutMs: 0}}",
        4,
        "tools.mcpServers[1].config.connectTimeoutMs",
        "positive",
    ),
    (
        "timeout-float",
        "- {name: x, config: {command: a, timeoutMs: 1.5}}",
        4,
        "tools.mcpServers[1].config.timeoutMs",
        "expected an integer",
    ),
    (
        "max-output",
        "- {name: x, config: {command: a, maxOutputLength: lots}}",
        4,
        "tools.mcpServers[1].config.maxOutputLength",
        "expected an integer",
    ),
    (
        "permission",
        "- {name: x, config: {command: a, permission: admin}}",
        4,
        "tools.mcpServers[1].config.permission",
        'expected "auto" or "r" or "rw"',
    ),
    (
        "config-unknown-key",
        "- {name: x, config: {command: a, connect_timeout_ms: 5}}",
        4,
        "tools.mcpServers[1].config.connect_timeout_ms",
        'did you mean "connectTimeoutMs"?',
    ),
    (
        "duplicate-name",
        "- {name: good, config: {command: again}}",
        4,
        "tools.mcpServers[1].name",
        'duplicate server name "good"',
    ),
]


@pytest.mark.parametrize(
    ("entry", "line", "field", "fragment"),
    [row[1:] for row in INVALID],
    ids=[row[0] for row in INVALID],
)
def test_6_5_invalid_mcp_entry_is_skipped_with_warning(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    entry: str,
    line: int,
    field: str,
    fragment: str,
) -> None:
    caplog.set_level(logging.WARNING, logger="penguin")
    servers = load_servers(
        tmp_path,
        f"- {{name: good, config: {{command: srv}}}}\n{entry}\n- {{name: after, config: {{url: 'https://a.example'}}}}\n",
    )
    # The invalid entry is skipped; its neighbours are kept, in order.
    assert [server.name for server in servers] == ["good", "after"]
    warnings = [record for record in caplog.records if record.name == "penguin"]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING
    message = warnings[0].getMessage()
    assert message.startswith(f"{tmp_path / CONFIG}:{line}: {field}: "), message
    assert fragment in message, message
    assert "skipped" in message


def test_6_5_mcp_servers_not_a_list_warns_and_uses_none(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="penguin")
    path = tmp_path / CONFIG
    path.write_text("tools:\n  builtin: []\n  mcpServers: {name: x}\n", encoding="utf-8")
    config = load_system_config(path)
    assert config.mcp_servers == ()
    assert config.builtin_tools == ()
    (record,) = caplog.records
    assert record.getMessage().startswith(f"{path}:3: tools.mcpServers: expected a list")


def test_6_5_block_style_entry_reports_the_line_of_the_bad_field(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="penguin")
    servers = load_servers(
        tmp_path,
        """\
        - name: remote
          config:
            url: https://example.com
            headers:
              X-Retries: 3
        """,
    )
    assert servers == ()
    (record,) = caplog.records
    assert record.getMessage().startswith(
        f"{tmp_path / CONFIG}:7: tools.mcpServers[0].config.headers.X-Retries: "
    )


_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
_WORD = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12).filter(str.strip)
_MAP = st.dictionaries(_WORD, _TEXT, max_size=3)
_STDIO = st.builds(
    McpStdioTransport,
    command=_WORD,
    args=st.tuples(_TEXT, _TEXT) | st.just(()),
    env=_MAP,
    cwd=st.none() | _WORD,
    sandbox=st.booleans(),
)
_REMOTE = st.builds(
    McpRemoteTransport,
    kind=st.sampled_from(["http", "sse"]),
    url=st.sampled_from(["http://127.0.0.1:8000/mcp", "https://example.com/a b?x=1"]),
    headers=_MAP,
)
_SERVERS = st.builds(
    McpServerConfig,
    name=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,11}", fullmatch=True),
    transport=_STDIO | _REMOTE,
    connect_timeout_ms=st.integers(1, 10**9),
    timeout_ms=st.none() | st.integers(-5, 10**9),
    max_output_length=st.none() | st.integers(-5, 10**9),
    permission=st.sampled_from(["auto", "r", "rw"]),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(server=_SERVERS)
def test_x2_5_an_added_entry_reads_back_as_the_server_sandbox_included(
    tmp_path: Path, server: McpServerConfig
) -> None:
    """What ``add_mcp_server`` writes loads as the server it was given: an opted-in
    stdio server is never written as an unsandboxed one (spec/sandbox.md X2.5)."""
    path = tmp_path / f"{uuid.uuid4().hex}.yaml"
    path.write_text("# mine\n")
    add_mcp_server(path, server)
    assert load_system_config(path).mcp_servers == (server,)
