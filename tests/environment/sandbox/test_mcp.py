"""MCP stdio servers run unsandboxed unless their entry opts in (spec/sandbox.md X2.5)."""

from __future__ import annotations

from pathlib import Path

import pytest

import penguin
from penguin.config import McpStdioTransport, load_system_config

from ..mcp.support import writing_server

pytestmark = pytest.mark.usefixtures("kernel_sandbox")


@pytest.mark.parametrize("opted_in", [True, False])
async def test_x2_5_a_stdio_server_is_sandboxed_only_when_its_entry_says_so(
    opted_in: bool, workspace: Path, decoy: Path
) -> None:
    target = decoy / "from-the-server"
    config = penguin.EnvironmentConfig(
        workspace_dir=workspace,
        mcp_servers=[writing_server(target, sandbox=opted_in)],
        sandbox=penguin.SandboxPolicy(mode="workspace-write", writable_tmp=False),
    )
    async with penguin.Environment.open(config) as env:
        [result] = await env.connect_mcp()
        assert result.status == "completed", result
    assert target.exists() is not opted_in


def test_x2_5_the_entry_key_is_read_and_checked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "system_config.yaml"
    path.write_text(
        "tools:\n  mcpServers:\n    - name: s\n      config:\n"
        "        command: srv\n        sandbox: true\n"
    )
    [server] = load_system_config(path).mcp_servers
    assert isinstance(server.transport, McpStdioTransport)
    assert server.transport.sandbox is True
    path.write_text(
        "tools:\n  mcpServers:\n    - name: s\n      config:\n"
        "        command: srv\n        sandbox: yes please\n"
    )
    assert load_system_config(path).mcp_servers == ()  # skipped, with a warning naming it
    assert "config.sandbox: expected true or false" in caplog.text
