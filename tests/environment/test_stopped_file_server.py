"""Reference 1.6 and 1.8, and mcp.md M1.3, where a file server stopped answering: on time.

A tool call's signal fires on the caller's interrupt or on the time limit, and the call
then ends ``aborted`` or with ``[tool timeout: …]``. A file tool's work, or a command's
start in a directory on a network file system, waits in a worker thread for a server
that stopped answering; the call must not wait with it. An MCP stdio server started
there fails within its connect budget, and the session goes on. Every test here mounts
a real FUSE file system whose server does not answer (``tests/stopped_server.py``), and
its guard thread answers after ten seconds: a call that came back only then failed. Each
runs with the kernel sandbox and without (a sandboxed command in such a directory is
started through ``nsenter``, not the sandbox's spawner, which would wait in its ``chdir``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import penguin
from penguin.config import McpStdioTransport

from ..stopped_server import StoppedServer, stopped_server
from .mcp.support import stdio_server
from .processes import (
    alive,
    call,
    env_processes,
    process_id_in,
    tool_definition,
    wait_until,
)

INTERRUPTED = "[interrupted: tool aborted by user]"


@pytest.fixture
async def env(
    workspace: Path, sandbox: penguin.SandboxPolicy | None
) -> AsyncIterator[penguin.Environment]:
    """An Environment with the default tools, with the sandbox and without."""
    config = penguin.EnvironmentConfig(workspace_dir=workspace, sandbox=sandbox)
    async with penguin.Environment.open(config) as env:
        yield env


def _args(tool: str, remote: Path) -> dict[str, Any]:
    every: dict[str, dict[str, Any]] = {
        "read_file": {"file_path": str(remote / "notes.txt")},
        "write_file": {"file_path": str(remote / "notes.txt"), "content": "hi\n"},
        "edit_file": {"file_path": str(remote / "notes.txt"), "old_string": "a", "new_string": "b"},
        "read_image": {"source": str(remote / "plot.png")},
        "exec_command": {"description": "list", "cmd": "ls", "workdir": str(remote)},
        "exec_command_tty": {"description": "ls", "cmd": "ls", "workdir": str(remote), "tty": True},
    }
    return every[tool]


async def _interrupted_while_waiting(
    env: penguin.Environment, server: StoppedServer, tool: str, args: dict[str, Any]
) -> tuple[penguin.protocol.ToolCallOutputPayload, bool]:
    """Call ``tool``, interrupt it once it waits on the server; its output, and the guard's part."""
    interrupt = trio.Event()
    async with trio.open_nursery() as nursery:

        async def interrupt_once_waiting() -> None:
            await wait_until(server.waiting)
            interrupt.set()

        nursery.start_soon(interrupt_once_waiting)
        output = await call(env, tool, args, interrupt=interrupt)
        given_up = server.given_up  # before the fixture answers it
    return output, given_up


@pytest.mark.parametrize(
    "tool",
    ["read_file", "write_file", "edit_file", "read_image", "exec_command", "exec_command_tty"],
)
async def test_1_8_a_call_waiting_on_a_stopped_file_server_ends_at_its_interrupt(
    env: penguin.Environment, tmp_path: Path, tool: str
) -> None:
    remote = tmp_path / "remote"
    remote.mkdir()
    with stopped_server(remote) as server:
        name, args = tool.removesuffix("_tty"), _args(tool, remote)
        output, given_up = await _interrupted_while_waiting(env, server, name, args)
    assert not given_up  # it ended while the server still did not answer
    assert output.stop_reason == "aborted"
    assert output.output == INTERRUPTED


async def test_1_8_a_call_waiting_on_a_stopped_file_server_ends_at_its_time_limit(
    tmp_path: Path, workspace: Path, sandbox: penguin.SandboxPolicy | None
) -> None:
    remote = tmp_path / "remote"
    remote.mkdir()
    tools = [tool_definition("read_file", timeout_ms=300)]
    config = penguin.EnvironmentConfig(workspace_dir=workspace, tools=tools, sandbox=sandbox)
    with stopped_server(remote) as server:
        async with penguin.Environment.open(config) as env:
            output = await call(env, "read_file", _args("read_file", remote))
            assert not server.given_up
    assert output.stop_reason == "failed"
    assert output.output == "[tool timeout: exceeded 300ms]"


@pytest.mark.parametrize("tty", [False, True], ids=["pipe", "tty"])
async def test_1_8_a_command_whose_workdir_links_onto_a_stopped_server_ends_at_its_interrupt(
    env: penguin.Environment, workspace: Path, tmp_path: Path, tty: bool
) -> None:
    """``workdir`` names a link in the workspace that leads onto the server's directory.

    By its path the directory is on the workspace's local disk. Taken as it was given,
    a pipe command was started in it from the loop's own thread, whose ``vfork``
    waited in the child's ``chdir`` for the server: every session of the process
    stopped, the interrupt with them (with the sandbox, its spawner waited instead).
    """
    remote = tmp_path / "remote"
    remote.mkdir()
    (workspace / "data").symlink_to(remote)
    args = {"description": "list", "cmd": "ls", "workdir": "data", "tty": tty}
    with stopped_server(remote) as server:
        output, given_up = await _interrupted_while_waiting(env, server, "exec_command", args)
    assert not given_up  # it ended while the server still did not answer
    assert output.stop_reason == "aborted"
    assert output.output == INTERRUPTED


async def test_1_8_a_link_in_the_workdir_onto_a_local_directory_starts_as_before(
    env: penguin.Environment, workspace: Path, tmp_path: Path
) -> None:
    """Resolved, a ``workdir`` through a link onto a local disk is started there as usual."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "found.txt").write_text("x\n")
    (workspace / "data").symlink_to(elsewhere)
    args = {"description": "list", "cmd": "ls; pwd", "workdir": "data"}
    output = await call(env, "exec_command", args)
    assert output.stop_reason == "completed"
    assert output.output.splitlines() == ["found.txt", str(elsewhere)]  # as bash says, unchanged


@pytest.mark.parametrize("tty", [False, True], ids=["pipe", "tty"])
async def test_4_8_a_command_the_server_lets_start_after_its_call_ended_is_killed(
    env: penguin.Environment, tmp_path: Path, tty: bool
) -> None:
    remote = tmp_path / "remote"
    remote.mkdir()
    args = {"description": "x", "cmd": "sleep 30", "workdir": str(remote), "tty": tty}
    with stopped_server(remote) as server:
        output, given_up = await _interrupted_while_waiting(env, server, "exec_command", args)
        assert (output.stop_reason, given_up) == ("aborted", False)
        blocked = server.waiting_children()  # the command's process, still in its chdir
        assert len(blocked) == 1
        server.let_in()  # the server comes back: the chdir succeeds, the command runs
        # Left by its call, the start is ended by the worker it finished in: nothing runs.
        await wait_until(lambda: not alive(blocked[0]))
        assert env_processes(env) == []


async def test_3_4_3_kill_command_ends_a_command_whose_start_waits_on_a_stopped_server(
    env: penguin.Environment, tmp_path: Path
) -> None:
    remote = tmp_path / "remote"
    remote.mkdir()
    args = {"description": "x", "cmd": "sleep 30", "workdir": str(remote)}
    with stopped_server(remote) as server:
        launched = await call(env, "exec_command", {**args, "run_in_background": True})
        process_id = process_id_in(launched.output)
        await wait_until(server.waiting)  # its start waits on the server
        killed = await call(env, "kill_command", {"process_id": process_id})
        assert not server.given_up
        assert [c.process_id for c in env.list_background_commands()] == []
    assert killed.stop_reason == "completed"
    assert killed.output == (
        f"[process {process_id} killed "
        "(SIGTERM to the process group, SIGKILL after a grace period)]"
    )


async def test_m1_3_an_mcp_server_whose_cwd_is_on_a_stopped_server_fails_within_its_budget(
    tmp_path: Path, workspace: Path, sandbox: penguin.SandboxPolicy | None
) -> None:
    """Its start waits in a worker a cancel leaves; the server, let in later, is killed."""
    remote = tmp_path / "remote"
    remote.mkdir()
    entry = stdio_server(connect_timeout_ms=300)
    assert isinstance(entry.transport, McpStdioTransport)
    transport = attrs.evolve(entry.transport, cwd=str(remote), sandbox=sandbox is not None)
    entry = attrs.evolve(entry, transport=transport)
    config = penguin.EnvironmentConfig(
        workspace_dir=workspace, mcp_servers=[entry], sandbox=sandbox
    )
    with stopped_server(remote) as server:
        async with penguin.Environment.open(config) as env:
            (result,) = await env.connect_mcp()
            assert not server.given_up  # it failed while the server still did not answer
            blocked = server.waiting_children()  # the server's process, still in its chdir
            assert len(blocked) == 1
            server.let_in()  # the file server comes back: the chdir succeeds
            await wait_until(lambda: not alive(blocked[0]))  # and the late start is killed
    assert (result.server, result.status) == ("s", "failed")
    assert result.error == "no answer within 0.3s"
