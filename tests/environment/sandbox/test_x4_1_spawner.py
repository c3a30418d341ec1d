"""The spawner that starts sandboxed commands inside their namespaces (spec/sandbox.md X4.1).

Real commands, real processes: a command's parent is the layout's spawner (not
penguin), it has no capability it could use against the mounts, its exit status is
what it exited with, and the spawner ends with the Environment. A spawner that died
is replaced before the next command; a command too large for the spawner's message
enters the namespaces with ``nsenter`` and is just as confined.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import trio

import penguin

from ..processes import spawned_tasks, wait_gone
from .conftest import tree_digest
from .test_enforcement import call, sandboxed, sh

pytestmark = pytest.mark.usefixtures("kernel_sandbox")


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def _children_of_penguin() -> list[str]:
    """The names of this process's live children (``comm``), zombies included."""
    found: list[str] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii") as handle:
                text = handle.read()
        except OSError:
            continue
        comm, rest = text[text.index("(") + 1 : text.rindex(")")], text.rsplit(")", 1)[1]
        if int(rest.split()[1]) == os.getpid():
            found.append(comm)
    return found


async def test_x4_1_a_command_starts_from_the_spawner_without_any_capability(
    workspace: Path,
) -> None:
    async with sandboxed(workspace, network=False) as env:
        out = await sh(
            env, "echo ppid=$PPID; grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status"
        )
        remount = await sh(
            env,
            "mount -o remount,rw / 2>/dev/null || echo refused-mount; "
            "unshare -U true 2>/dev/null || echo refused-unshare",
        )
        status = await call(env, "exec_command", cmd="exit 5")
        killed = await call(env, "exec_command", cmd="kill -TERM $$")
    fields = dict(
        line.split("=", 1) if "=" in line else line.split(":\t") for line in out.split("\n") if line
    )
    assert int(fields["ppid"]) != os.getpid()  # the spawner's child, not penguin's
    assert fields["CapEff"] == fields["CapBnd"] == "0000000000000000"
    assert fields["NoNewPrivs"] == "1"
    assert remount == "refused-mount\nrefused-unshare\n"
    assert status.output == "[exit code: 5]"
    assert killed.output == "[terminated by signal SIGTERM]"


async def test_x4_1_a_sandboxed_command_that_ends_in_its_window_is_watched_by_its_call(
    workspace: Path,
) -> None:
    # The call waits on the spawner's reply socket and the output itself: no session
    # task, pump or watcher during the window; the exit status is the spawner's.
    async with sandboxed(workspace) as env:
        await sh(env, "true")  # the spawner is up
        with spawned_tasks() as spawned:
            done = await call(env, "exec_command", cmd="echo out; echo err >&2; exit 3")
            killed = await call(env, "exec_command", cmd="echo x; kill -TERM $$")
    assert done.output == "out\nerr\n\n[exit code: 3]"
    assert killed.output == "x\n\n[terminated by signal SIGTERM]"
    sessions = [name.rsplit(".", 1)[-1] for name in spawned if "CommandSession." in name]
    assert sessions == ["adopt", "adopt"]  # each ends its group once its call is done


async def test_x4_1_a_watched_command_that_exits_leaves_no_daemon_behind(workspace: Path) -> None:
    # The call watched the command to its exit; the setsid daemon it left (outside its
    # group and tree) is still ended, by the session's task, once the call returned.
    # (The sandbox has no PID namespace: the pids printed are the host's.)
    cmd = (
        "sleep 1000 & echo $!; "
        "setsid -f sh -c 'echo $$ > daemon.pid; exec sleep 1000' </dev/null >/dev/null 2>&1; "
        "while [ ! -s daemon.pid ]; do sleep 0.01; done; cat daemon.pid"
    )
    async with sandboxed(workspace) as env:
        out = await call(env, "exec_command", cmd=cmd)
        assert out.stop_reason == "completed", out.output
        pids = [int(pid) for pid in out.output.split()]
        assert len(pids) == 2
        await wait_gone(pids)
        assert env.list_background_commands() == []


async def test_x4_1_the_spawner_ends_with_the_environment(workspace: Path) -> None:
    async with sandboxed(workspace, network=False) as env:
        spawner = int(await sh(env, "echo $PPID"))
        started = _start_time(spawner)
        assert started is not None
        assert "bwrap" in _children_of_penguin()
    assert _start_time(spawner) != started  # gone (or its pid is someone else's)
    assert "bwrap" not in _children_of_penguin()  # bwrap reaped too: no zombie left


async def test_x4_1_a_dead_spawner_is_replaced_before_the_next_command(
    workspace: Path, decoy: Path
) -> None:
    before = tree_digest(decoy)
    async with sandboxed(workspace, network=False) as env:
        spawner = int(await sh(env, "echo $PPID"))
        pidfd = os.pidfd_open(spawner)
        try:
            os.kill(spawner, signal.SIGKILL)
            await trio.lowlevel.wait_readable(pidfd)
        finally:
            os.close(pidfd)
        out = await sh(env, f"echo ppid=$PPID; echo x > {decoy / 'keep.txt'}; echo y > ok")
        assert f"ppid={spawner}\n" not in out
        assert "Read-only file system" in out
        assert (workspace / "ok").read_text() == "y\n"
    assert tree_digest(decoy) == before


async def test_x4_1_a_command_too_large_for_the_spawner_enters_with_nsenter(
    workspace: Path, decoy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two variables of 100 KB: over the spawner's 128 KB message, under exec's limits.
    monkeypatch.setenv("PENGUIN_TEST_BIG_A", "a" * 100_000)
    monkeypatch.setenv("PENGUIN_TEST_BIG_B", "b" * 100_000)
    before = tree_digest(decoy)
    async with sandboxed(workspace, network=False) as env:
        out = await sh(
            env,
            "echo ppid=$PPID ${#PENGUIN_TEST_BIG_A} ${#PENGUIN_TEST_BIG_B}; "
            f"grep ^CapBnd /proc/self/status; echo x > {decoy / 'keep.txt'}",
        )
    assert f"ppid={os.getpid()} 100000 100000\n" in out  # nsenter exec'd into it
    assert "CapBnd:\t0000000000000000" in out or os.geteuid() != 0
    assert "Read-only file system" in out
    assert tree_digest(decoy) == before


async def test_x4_1_many_commands_starting_at_once_share_the_spawner(workspace: Path) -> None:
    # 64 start messages (each with the whole environment) overfill the socket's buffer:
    # the senders queue, and each command still starts once, with its own output.
    outputs: dict[int, str] = {}

    async def one(i: int) -> None:
        outputs[i] = await sh(env, f"echo {i}-$PPID")

    async with sandboxed(workspace, network=False) as env, trio.open_nursery() as nursery:
        for i in range(64):
            nursery.start_soon(one, i)
    parents = {out.split("-", 1)[1] for out in outputs.values()}
    assert sorted(outputs) == list(range(64))
    assert all(out.startswith(f"{i}-") for i, out in outputs.items())
    assert len(parents) == 1  # one spawner started them all
    assert parents != {f"{os.getpid()}\n"}


def _live_with_argv(argv: bytes) -> list[int]:
    """Pids of live (not zombie) processes whose command line is exactly ``argv``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                if handle.read() == argv:
                    found.append(int(name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("delay", [0.0, 0.001, 0.003, 0.01, 0.03])
async def test_x4_1_a_start_cancelled_at_any_moment_leaves_no_process(
    workspace: Path, delay: float
) -> None:
    # Whenever the cancellation lands (before the request, while the spawner starts
    # the command, after its pid came back), nothing it started outlives the session.
    marker = f"{31 + delay:.3f}"
    async with sandboxed(workspace, network=False) as env:
        with trio.move_on_after(delay):
            async with trio.open_nursery() as nursery:
                for _ in range(8):
                    nursery.start_soon(sh, env, f"exec sleep {marker}")
        out = await sh(env, "echo still works")
    assert out == "still works\n"
    assert _live_with_argv(f"sleep\0{marker}\0".encode()) == []


async def test_x4_1_spawn_errors_read_as_without_the_sandbox(workspace: Path) -> None:
    cases = ({"cmd": "echo a\0b"}, {"cmd": "true", "workdir": str(workspace / "gone")})
    texts: dict[bool, list[str]] = {}
    for boxed in (False, True):
        if boxed:
            async with sandboxed(workspace, network=False) as env:
                texts[boxed] = [(await call(env, "exec_command", **c)).output for c in cases]
        else:
            config = penguin.EnvironmentConfig(workspace_dir=workspace)
            async with penguin.Environment.open(config) as env:
                texts[boxed] = [(await call(env, "exec_command", **c)).output for c in cases]
    assert texts[True] == texts[False]
    assert texts[True][0] == "[spawn error: embedded null byte]"
    assert texts[True][1] == f"[spawn error: No such file or directory: '{workspace / 'gone'}']"
