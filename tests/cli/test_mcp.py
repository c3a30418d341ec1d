"""Spec mcp.md M3: the MCP surfaces of the command line, as real processes.

``penguin run`` against a local model server with the test MCP server configured,
``penguin tool --list`` and ``penguin tool mcp__s__t``, and ``penguin config mcp
list|add|remove|test`` on a real ``system_config.yaml``. After each command, no
process carrying the test's run id survives (psutil).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import trio

from penguin import config as cfg
from penguin import protocol as om
from penguin.cli._render import Renderer
from penguin.environment.sandbox import probe
from penguin.llm import testing as t

from ..environment.mcp.support import REPO, stdio_server, writing_server
from ..environment.processes import RUN_VARIABLE, marked_processes
from .test_run import configure_model, tool_call_reply

REASON = probe().reason
kernel = pytest.mark.skipif(REASON is not None, reason=f"sandbox unavailable here: {REASON}")


@pytest.fixture
def run_id() -> str:
    return uuid.uuid4().hex


async def penguin(
    *args: str, root: Path, cwd: Path, run: str, stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    done = await trio.run_process(
        [sys.executable, "-m", "penguin", *args, "--root", str(root)],
        cwd=cwd,
        stdin=stdin,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env={**os.environ, RUN_VARIABLE: run, "PYTHONPATH": str(REPO)},
    )
    assert not marked_processes(run=run)  # no MCP server outlived the command
    return done


def with_server(root: Path, *servers: cfg.McpServerConfig) -> Path:
    path = cfg.AgentPaths(root).system_config
    cfg.dump_default_system_config(path)
    for server in servers:
        cfg.add_mcp_server(path, server)
    return path


def test_m3_1_the_connect_phase_is_two_lines() -> None:
    out = io.StringIO()
    view = Renderer(out, color=False)
    view.show(om.mcp_connect_begin(["a", "b"]))
    view.show(
        om.mcp_connect_end(
            "failed",
            [
                om.McpServerConnectResult(
                    server="a", transport="stdio", status="completed", duration_ms=5, tools=3
                ),
                om.McpServerConnectResult(
                    server="b", transport="http", status="failed", duration_ms=9, error="refused"
                ),
            ],
        )
    )
    view.show(om.mcp_connect_end("aborted"))
    assert out.getvalue() == (
        "[mcp] connecting: a, b\n"
        "[mcp] connected: a (3 tools), b failed: refused\n"
        "[mcp] connecting interrupted\n"
    )


async def test_m3_1_run_shows_the_phase_and_calls_the_mcp_tool(tmp_path: Path, run_id: str) -> None:
    root = tmp_path / "root"
    with_server(
        root,
        stdio_server("s"),
        cfg.McpServerConfig(
            name="gone", transport=cfg.McpStdioTransport(command="/nonexistent/server")
        ),
    )
    workspace = tmp_path / "ws"
    workspace.mkdir()
    replies = iter(
        [
            tool_call_reply("call_a", "mcp__s__echo", {"text": "hello from mcp"}),
            t.sse_reply([t.content_chunk("All done."), t.finish_chunk()]),
        ]
    )
    async with t.serve_openai_compatible(lambda request: next(replies)) as server:
        configure_model(root, server.base_url)
        done = await penguin(
            "run",
            "-m",
            "Echo it",
            "--workspace",
            str(workspace),
            root=root,
            cwd=tmp_path,
            run=run_id,
        )
        tools = [tool["function"]["name"] for tool in server.requests[0].json()["tools"]]
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "[mcp] connecting: s, gone\n" in out
    assert (
        "[mcp] connected: s (18 tools), gone failed: cannot start '/nonexistent/server': "
        "No such file or directory\n"
    ) in out
    assert "⎿ completed: hello from mcp" in out
    assert out.index("[mcp] connecting") < out.index("● mcp__s__echo")
    assert "mcp__s__echo" in tools
    assert '[penguin] MCP server "gone" unavailable:' in done.stderr.decode()


async def test_m3_2_tool_list_connects_the_agent_s_servers(tmp_path: Path, run_id: str) -> None:
    root = tmp_path / "root"
    with_server(root, stdio_server("s"))
    done = await penguin("tool", "--list", root=root, cwd=tmp_path, run=run_id)
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    names = [line.split()[0] for line in lines]
    assert names[0] == "read_file"
    assert "mcp__s__echo" in names
    assert any(
        line.split()[0] == "mcp__s__echo" and "Echo the text back." in line for line in lines
    )


async def test_m3_2_tool_calls_one_mcp_tool(tmp_path: Path, run_id: str) -> None:
    root = tmp_path / "root"
    with_server(root, stdio_server("s"), stdio_server("other", env={"MCP_TEST_ONCE": "/"}))
    done = await penguin(
        "tool", "mcp__s__echo", '{"text": "hi there"}', root=root, cwd=tmp_path, run=run_id
    )
    assert (done.returncode, done.stdout.decode()) == (0, "hi there\n")
    assert b"unavailable" not in done.stderr  # only the server it names was connected
    failed = await penguin("tool", "mcp__s__fail", root=root, cwd=tmp_path, run=run_id)
    assert (failed.returncode, failed.stdout.decode()) == (1, "it broke\n")
    unknown = await penguin("tool", "mcp__nobody__x", root=root, cwd=tmp_path, run=run_id)
    assert (unknown.returncode, unknown.stdout.decode()) == (1, "Unknown tool: mcp__nobody__x\n")


async def test_m3_3_add_list_remove_keep_the_file_s_comments(tmp_path: Path, run_id: str) -> None:
    root = tmp_path / "root"
    path = cfg.AgentPaths(root).system_config
    path.parent.mkdir(parents=True)
    path.write_text("# my agent\nsystem_prompt: hi  # short\n")
    add = await penguin(
        "config",
        "mcp",
        "add",
        "files",
        "--command",
        "npx",
        "--arg=-y",
        "--arg",
        "srv",
        "--env",
        "TOKEN=abc",
        "--timeout-ms",
        "5000",
        root=root,
        cwd=tmp_path,
        run=run_id,
    )
    assert add.returncode == 0, add.stderr.decode()
    remote = await penguin(
        "config",
        "mcp",
        "add",
        "web",
        "--url",
        "https://example.com/sse",
        "--transport",
        "sse",
        "--header",
        "Authorization=Bearer t",
        "--permission",
        "r",
        root=root,
        cwd=tmp_path,
        run=run_id,
    )
    assert remote.returncode == 0, remote.stderr.decode()
    text = path.read_text()
    assert text.startswith("# my agent\nsystem_prompt: hi  # short\n")
    assert "builtin" not in text  # the default toolset stays
    servers = cfg.load_system_config(path).mcp_servers
    assert servers == (
        cfg.McpServerConfig(
            name="files",
            transport=cfg.McpStdioTransport(
                command="npx", args=("-y", "srv"), env={"TOKEN": "abc"}
            ),
            timeout_ms=5000,
        ),
        cfg.McpServerConfig(
            name="web",
            transport=cfg.McpRemoteTransport(
                kind="sse", url="https://example.com/sse", headers={"Authorization": "Bearer t"}
            ),
            permission="r",
        ),
    )
    listed = await penguin("config", "mcp", "list", root=root, cwd=tmp_path, run=run_id)
    assert listed.stdout.decode() == (
        "files  stdio  npx -y srv\nweb    sse    https://example.com/sse\n"
    )
    again = await penguin(
        "config", "mcp", "add", "files", "--command", "x", root=root, cwd=tmp_path, run=run_id
    )
    assert again.returncode == 1
    assert 'an MCP server named "files" is already configured' in again.stderr.decode()
    removed = await penguin("config", "mcp", "remove", "files", root=root, cwd=tmp_path, run=run_id)
    assert removed.returncode == 0
    assert [s.name for s in cfg.load_system_config(path).mcp_servers] == ["web"]
    assert path.read_text().startswith("# my agent\n")
    missing = await penguin("config", "mcp", "remove", "files", root=root, cwd=tmp_path, run=run_id)
    assert missing.returncode == 1
    assert 'no MCP server named "files"' in missing.stderr.decode()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["bad name", "--command", "x"], "name: invalid server name"),
        (["u", "--url", "ftp://x"], "url: expected an http:// or https:// URL"),
        (
            ["u", "--command", "x", "--header", "A=1"],
            "--header applies only to a server given by --url",
        ),
        (
            ["u", "--url", "https://x", "--arg", "a"],
            "--arg applies only to a server given by --command",
        ),
        (["u", "--command", "x", "--env", "novalue"], "--env 'novalue': expected KEY=VALUE"),
        (
            ["u", "--url", "https://x", "--sandbox"],
            "--sandbox applies only to a server given by --command",
        ),
    ],
)
async def test_m3_3_add_refuses_bad_input(
    tmp_path: Path, run_id: str, options: list[str], message: str
) -> None:
    root = tmp_path / "root"
    done = await penguin("config", "mcp", "add", *options, root=root, cwd=tmp_path, run=run_id)
    assert done.returncode == 1
    assert message in done.stderr.decode()


async def test_m3_3_add_needs_a_command_or_a_url(tmp_path: Path, run_id: str) -> None:
    done = await penguin("config", "mcp", "add", "x", root=tmp_path, cwd=tmp_path, run=run_id)
    assert done.returncode == 2  # argparse: one of --command --url is required
    assert b"--command" in done.stderr


async def test_m3_3_test_connects_and_lists_the_tools(tmp_path: Path, run_id: str) -> None:
    root = tmp_path / "root"
    with_server(
        root,
        stdio_server("s"),
        cfg.McpServerConfig(name="gone", transport=cfg.McpStdioTransport(command="/nonexistent/x")),
    )
    done = await penguin("config", "mcp", "test", "s", root=root, cwd=tmp_path, run=run_id)
    assert done.returncode == 0, done.stderr.decode()
    first, *tools = done.stdout.decode().splitlines()
    assert first.startswith("s: connected in ")
    assert first.endswith(" ms, 18 tools")
    assert tools[0].split() == ["mcp__s__echo", "r", "Echo", "the", "text", "back."]
    assert tools[1].split()[:2] == ["mcp__s__write_note", "rw"]
    gone = await penguin("config", "mcp", "test", "gone", root=root, cwd=tmp_path, run=run_id)
    assert gone.returncode == 1
    assert (
        "penguin config mcp: gone is unavailable: cannot start '/nonexistent/x': "
        "No such file or directory"
    ) in gone.stderr.decode()
    unknown = await penguin("config", "mcp", "test", "zz", root=root, cwd=tmp_path, run=run_id)
    assert unknown.returncode == 1
    assert 'no MCP server named "zz"' in unknown.stderr.decode()


async def test_x2_5_add_sandbox_writes_the_key_and_list_shows_it(
    tmp_path: Path, run_id: str
) -> None:
    root = tmp_path / "root"
    for name, more in (("boxed", ["--sandbox"]), ("open", [])):
        command = ["config", "mcp", "add", name, "--command", "srv", *more]
        done = await penguin(*command, root=root, cwd=tmp_path, run=run_id)
        assert done.returncode == 0, done.stderr.decode()
    servers = cfg.load_system_config(cfg.AgentPaths(root).system_config).mcp_servers
    assert [(server.name, server.transport) for server in servers] == [
        ("boxed", cfg.McpStdioTransport(command="srv", sandbox=True)),
        ("open", cfg.McpStdioTransport(command="srv")),
    ]
    listed = await penguin("config", "mcp", "list", root=root, cwd=tmp_path, run=run_id)
    assert listed.stdout.decode() == "boxed  stdio  srv  (sandboxed)\nopen   stdio  srv\n"


@kernel
async def test_x2_5_config_mcp_test_starts_an_opted_in_server_under_the_sandbox(
    tmp_path: Path, run_id: str
) -> None:
    """As a session here would: under the project file's [sandbox] (no writable /tmp)."""
    root, decoy, workspace = tmp_path / "root", tmp_path / "decoy", tmp_path / "ws"
    decoy.mkdir()
    workspace.mkdir()
    with_server(
        root,
        writing_server(decoy / "boxed", sandbox=True, name="boxed"),
        writing_server(decoy / "open", sandbox=False, name="open"),
    )
    project = cfg.AgentPaths(root).project_config
    project.write_text("[sandbox]\nwritable_tmp = false\n")
    project.chmod(0o600)
    boxed = await penguin("config", "mcp", "test", "boxed", root=root, cwd=workspace, run=run_id)
    assert boxed.returncode == 0, boxed.stderr.decode()
    assert boxed.stderr.decode() == "[sandbox: workspace-write, network on]\n"
    assert boxed.stdout.decode().startswith("boxed: connected in ")
    assert not (decoy / "boxed").exists()
    unboxed = await penguin("config", "mcp", "test", "open", root=root, cwd=workspace, run=run_id)
    assert unboxed.returncode == 0, unboxed.stderr.decode()
    assert unboxed.stderr.decode() == ""
    assert (decoy / "open").exists()
    # --sandbox chooses, as for penguin run; on a server that is not boxed it is refused
    test = ("config", "mcp", "test")
    off = await penguin(*test, "boxed", "--sandbox", "off", root=root, cwd=workspace, run=run_id)
    assert off.returncode == 0, off.stderr.decode()
    assert off.stderr.decode() == "[sandbox: off, network on]\n"
    assert (decoy / "boxed").exists()
    refused = await penguin(*test, "open", "--no-network", root=root, cwd=workspace, run=run_id)
    assert refused.returncode == 1
    assert "open runs unsandboxed (its entry does not set sandbox: true)" in (
        refused.stderr.decode()
    )


ODD_SERVER = """
import sys
from mcp.server.mcpserver import MCPServer

app = MCPServer("odd")


@app.tool(description="Clears \\x1b[2J\\x1b[Hthe screen\\r")
def odd() -> str:
    return "x"


if __name__ == "__main__":
    if len(sys.argv) > 1:
        sys.exit("broke \\x1b[31mred\\x1b[0m")
    app.run()
"""


async def test_m3_3_a_server_s_text_reaches_the_terminal_inert(tmp_path: Path, run_id: str) -> None:
    """A tool's description and a server's complaint are the server's words: listed by
    test and tool --list, their control characters are shown as �, not obeyed."""
    server = tmp_path / "odd_server.py"
    server.write_text(ODD_SERVER)
    root = tmp_path / "root"
    with_server(
        root,
        cfg.McpServerConfig(
            name="odd", transport=cfg.McpStdioTransport(command=sys.executable, args=(str(server),))
        ),
        cfg.McpServerConfig(
            name="sad",
            transport=cfg.McpStdioTransport(command=sys.executable, args=(str(server), "x")),
        ),
    )
    listed = await penguin("config", "mcp", "test", "odd", root=root, cwd=tmp_path, run=run_id)
    assert listed.returncode == 0, listed.stderr.decode()
    tools = await penguin("tool", "--list", root=root, cwd=tmp_path, run=run_id)
    sad = await penguin("config", "mcp", "test", "sad", root=root, cwd=tmp_path, run=run_id)
    assert sad.returncode == 1
    for done in (listed, tools, sad):
        shown = (done.stdout + done.stderr).decode()
        assert "\x1b" not in shown, shown
        assert "\r" not in shown, shown
    assert "Clears \ufffd[2J\ufffd[Hthe screen" in listed.stdout.decode()
    assert "Clears \ufffd[2J\ufffd[Hthe screen" in tools.stdout.decode()
    assert "broke \ufffd[31mred\ufffd[0m" in sad.stderr.decode()
