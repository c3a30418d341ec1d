"""Spec mcp.md M1: connecting MCP servers, against real servers (stdio, HTTP, SSE)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import attrs
import pytest

import penguin
from penguin.config import McpStdioTransport, ToolDefinitionConfig
from penguin.environment.mcp._connection import remote_tls_context

from ..processes import alive, marked_processes, wait_gone
from .support import (
    RAW_MODULE,
    call,
    command_server,
    environment_config,
    http_server,
    remote_server,
    stdio_server,
)

pytestmark = pytest.mark.usefixtures("no_stray_processes")

EXITS = "import sys; sys.stderr.write('no config\\n'); sys.exit(7)"


class Shout:
    name = "shout"
    definition = ToolDefinitionConfig(name="shout", description="Shout.", permission="r")

    async def execute(self, args: dict[str, object], ctx: penguin.ToolContext) -> None:
        await ctx.emit("HI")


async def test_m1_1_stdio_tools_come_after_the_builtins_and_before_custom_tools(
    workspace: Path,
) -> None:
    config = penguin.EnvironmentConfig(
        workspace_dir=workspace,
        tools=[e for e in penguin.config.default_tools() if e.name == "read_file"],
        custom_tools=[Shout()],
        mcp_servers=[stdio_server()],
    )
    async with penguin.Environment.open(config) as env:
        names = [tool.name for tool in await env.list_tools()]
        assert names[0] == "read_file"
        assert names[-1] == "shout"
        assert names[1:4] == ["mcp__s__echo", "mcp__s__write_note", "mcp__s__image"]
        assert all(name.startswith("mcp__s__") for name in names[1:-1])
        echo = next(tool for tool in await env.list_tools() if tool.name == "mcp__s__echo")
        assert echo.description == "Echo the text back."
        assert echo.parameters == {"type": "object", "properties": {"text": {"type": "string"}}}
        assert (await call(env, "echo", '{"text": "hello"}')).output == "hello"


@pytest.mark.parametrize("kind", ["http", "sse"])
async def test_m1_1_remote_servers_over_streamable_http_and_sse(
    workspace: Path, tmp_path: Path, kind: str
) -> None:
    with http_server(tmp_path, kind) as server:  # type: ignore[arg-type]
        entry = remote_server("r", server.url, kind)  # type: ignore[arg-type]
        async with penguin.Environment.open(environment_config(workspace, entry)) as env:
            (result,) = await env.connect_mcp()
            assert (result.server, result.transport, result.status) == ("r", kind, "completed")
            out = await call(env, "echo", '{"text": "over the wire"}', server="r")
            assert (out.output, out.stop_reason) == ("over the wire", "completed")


async def test_m1_2_opening_the_environment_connects_nothing(
    no_stray_processes: str, workspace: Path
) -> None:
    touched = workspace / "started"
    entry = stdio_server(env={"MCP_TEST_TOUCH": str(touched)})
    async with penguin.Environment.open(environment_config(workspace, entry)) as env:
        assert env.mcp_servers == ("s",)
        assert env.tool_permission("mcp__s__echo") is None  # unknown until connected
        assert not touched.exists()
        assert not marked_processes(run=no_stray_processes)
        await env.list_tools()
        assert touched.exists()


async def test_m1_2_the_tool_list_is_a_snapshot_connected_once(workspace: Path) -> None:
    async with penguin.Environment.open(environment_config(workspace, stdio_server())) as env:
        first = await env.list_tools()
        pid = (await call(env, "pid")).output
        results = await env.connect_mcp()
        assert await env.list_tools() == first
        assert await env.connect_mcp() is results
        assert (await call(env, "pid")).output == pid  # the same server process


async def test_m1_2_every_server_connects_in_parallel(workspace: Path) -> None:
    # Each server waits, before it answers at all, for the file the other one creates
    # when it starts: connected one after the other, the first would time out.
    a, b = workspace / "a", workspace / "b"
    servers = [
        stdio_server("one", env={"MCP_TEST_TOUCH": str(a), "MCP_TEST_WAIT_FOR": str(b)}),
        stdio_server("two", env={"MCP_TEST_TOUCH": str(b), "MCP_TEST_WAIT_FOR": str(a)}),
    ]
    async with penguin.Environment.open(environment_config(workspace, *servers)) as env:
        results = await env.connect_mcp()
        assert [(r.server, r.status) for r in results] == [
            ("one", "completed"),
            ("two", "completed"),
        ]
        assert all(r.tools == 18 and r.duration_ms >= 0 for r in results)


async def test_m1_3_unavailable_servers_are_skipped_with_one_line_each(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    python = sys.executable
    servers = [
        command_server("missing", "/nonexistent/mcp-server"),
        command_server(
            "exits", python, "-c", "import sys; sys.stderr.write('no config\\n'); sys.exit(7)"
        ),
        command_server("silent", python, "-m", RAW_MODULE, "silent", connect_timeout_ms=500),
        command_server("garbage", python, "-m", RAW_MODULE, "garbage", connect_timeout_ms=500),
        remote_server("refused", "http://127.0.0.1:9/mcp"),
        stdio_server("good"),
    ]
    for server in servers[2:4]:
        server.transport.env.update({"PYTHONPATH": str(Path(__file__).parents[3])})  # type: ignore[union-attr]
    async with penguin.Environment.open(environment_config(workspace, *servers)) as env:
        results = {r.server: r for r in await env.connect_mcp()}
        assert results["good"].status == "completed"
        failed = {name: r.error for name, r in results.items() if r.status == "failed"}
        assert set(failed) == {"missing", "exits", "silent", "garbage", "refused"}
        assert (
            failed["missing"] == "cannot start '/nonexistent/mcp-server': No such file or directory"
        )
        assert failed["exits"] == "exited with code 7: no config"
        assert failed["silent"] == "no answer within 0.5s"
        assert failed["garbage"] == (
            "no answer within 0.5s (it wrote 'hello, I am not JSON-RPC', which is not JSON-RPC)"
        )
        assert failed["refused"]
        assert all(results[name].tools is None for name in failed)
        names = [tool.name for tool in await env.list_tools()]
        assert names
        assert all(name.startswith("mcp__good__") for name in names)
        assert (await call(env, "echo", '{"text": "still here"}', server="good")).output == (
            "still here"
        )
    lines = [r.getMessage() for r in caplog.records if "unavailable" in r.getMessage()]
    assert sorted(lines) == sorted(
        f'[penguin] MCP server "{name}" unavailable: {reason}' for name, reason in failed.items()
    )


async def test_m1_3_a_listing_keeps_a_tool_without_schema_and_skips_bad_names(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    raw = command_server("raw", sys.executable, "-m", RAW_MODULE, "no-schema")
    raw.transport.env.update({"PYTHONPATH": str(Path(__file__).parents[3])})  # type: ignore[union-attr]
    named = stdio_server(env={"MCP_TEST_EXTRA_TOOLS": "1"})
    async with penguin.Environment.open(environment_config(workspace, raw, named)) as env:
        tools = {tool.name: tool for tool in await env.list_tools()}
        assert tools["mcp__raw__bare"].parameters == {"type": "object", "properties": {}}
        assert (await call(env, "bare", server="raw")).output == "bare ok"
        assert not any("bad" in name or "xxxx" in name for name in tools)
        results = {r.server: r for r in await env.connect_mcp()}
        assert results["s"].tools == 18  # the two bad names are not counted
    skipped = [
        r.getMessage() for r in caplog.records if "is not a valid tool name" in r.getMessage()
    ]
    assert len(skipped) == 2


async def test_m1_5_stdio_servers_get_the_environment_the_entry_env_and_the_workspace(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FROM_HOST", "host value")
    other = workspace / "elsewhere"
    other.mkdir()
    servers = [
        stdio_server(env={"FROM_ENTRY": "entry value"}),
        stdio_server("moved", env={}),
    ]
    servers[1] = penguin.config.McpServerConfig(
        name="moved",
        transport=penguin.config.McpStdioTransport(
            command=sys.executable,
            args=servers[1].transport.args,  # type: ignore[union-attr]
            env=servers[1].transport.env,  # type: ignore[union-attr]
            cwd="elsewhere",
        ),
    )
    config = environment_config(workspace, *servers, vault={"SECRET": "vaulted"})
    async with penguin.Environment.open(config) as env:
        for name, expected in [
            ("FROM_HOST", "host value"),
            ("FROM_ENTRY", "entry value"),
            ("SECRET", "<unset>"),
        ]:
            out = await call(env, "environ", json.dumps({"variable": name}))
            assert out.output == f"{expected}\n{workspace}"
        owner = (await call(env, "environ", '{"variable": "PENGUIN_OWNER"}')).output.split("\n")[0]
        assert owner.startswith("host-")
        assert "/mcp-s-" in owner
        moved = await call(env, "environ", '{"variable": "X"}', server="moved")
        assert moved.output == f"<unset>\n{other}"


async def test_m1_5_no_server_process_outlives_its_environment(workspace: Path) -> None:
    async with penguin.Environment.open(environment_config(workspace, stdio_server())) as env:
        server = int((await call(env, "pid")).output)
        inside, outside = map(int, (await call(env, "children")).output.split())
        assert os.getpgid(inside) == server  # in the server's group
        assert os.getpgid(outside) != server  # left it
        assert all(alive(pid) for pid in (server, inside, outside))
    assert not any(alive(pid) for pid in (server, inside, outside))


async def test_m1_5_a_server_that_crashes_takes_what_it_started_with_it(workspace: Path) -> None:
    async with penguin.Environment.open(environment_config(workspace, stdio_server())) as env:
        server = int((await call(env, "pid")).output)
        inside, outside = map(int, (await call(env, "children")).output.split())
        out = await call(env, "crash")
        assert (out.output, out.stop_reason) == ('[mcp error: server "s" disconnected]', "failed")
        await wait_gone([server, inside, outside])


async def test_m1_3_a_stdio_server_whose_directory_is_missing_names_the_directory(
    workspace: Path,
) -> None:
    """Its command exists; the start failed in the chdir, so the reason names the directory."""
    entry = stdio_server("s")
    assert isinstance(entry.transport, McpStdioTransport)
    transport = attrs.evolve(entry.transport, cwd="missing/dir")
    config = environment_config(workspace, attrs.evolve(entry, transport=transport))
    async with penguin.Environment.open(config) as env:
        (result,) = await env.connect_mcp()
    assert result.status == "failed"
    assert result.error == (
        f"cannot start {sys.executable!r} in {str(workspace / 'missing' / 'dir')!r}: "
        "No such file or directory"
    )


async def test_20_1_remote_connections_share_one_tls_context_per_trust_setting(
    one_ca: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Made once per process (30 ms of CPU each), for SSL_CERT_FILE/SSL_CERT_DIR as they are."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    system = await remote_tls_context()
    assert await remote_tls_context() is system
    monkeypatch.setenv("SSL_CERT_FILE", str(one_ca))
    own = await remote_tls_context()
    assert own is not system
    assert own.cert_store_stats()["x509_ca"] == 1  # the file the variable names, and only it
    assert await remote_tls_context() is own
    monkeypatch.delenv("SSL_CERT_FILE")
    assert await remote_tls_context() is system
