"""Issue 9.4: no process survives a killed host.

A host program (``watchdog_host.py``, or ``penguin run``) holds an Environment and the
stubborn processes of one kind of the chaos test; the test SIGKILLs the host, which
runs no code of its own after that, and then every process whose owner marker names
the host's tag must be gone within 2 s — the host's watchdog swept them. The
watchdog must exit after its sweep, and must kill nothing else: not a decoy with
another host's marker, nor one whose marker merely begins with the same characters,
nor an unmarked process, nor the host's own forked child.

Waiting is on conditions: the host's JSON records (watchdog_host.py's docstring), a
file the command writes, the process table polled under a deadline. The 2 s deadline
starts when SIGKILL is sent, and is checked after the poll, never during it.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import psutil
import pytest
import trio

import penguin
from penguin import protocol as om
from penguin.environment.supervisor import OWNER_VARIABLE, _watchdog
from penguin.llm import testing as t

from ..cli.test_run import configure_model, tool_call_reply
from .processes import alive
from .supervisor.test_cgroup import AS_A_MEMBER, ESCAPE, cgroup_of, penguin_cgroups
from .test_chaos import KINDS

pytestmark = pytest.mark.skipif(not hasattr(os, "killpg"), reason="POSIX processes")

HOST_PROGRAM: Final = Path(__file__).with_name("watchdog_host.py")
PROMISE: Final = 2.0
"""Seconds after the host's SIGKILL by which nothing it started may be alive."""
START_DEADLINE: Final = 60.0
"""How long a host may take to start and report (a loaded machine, a cold import)."""

_CHAOS = {kind.name: kind.cmd for kind in KINDS}
STUBBORN: Final = {
    "plain": 'sleep 1000 & echo "ready $!"; wait',
    "trap_term": _CHAOS["trap_term"],
    "setsid": _CHAOS["setsid"],
    "double_fork": _CHAOS["double_fork"],
    "daemon": _CHAOS["daemon"],
    "nohup": _CHAOS["nohup"],
}


# ---------------------------------------------------------------------- the process table


def marked(prefix: str) -> list[psutil.Process]:
    """Live processes whose owner marker begins with ``prefix``."""
    found = []
    for proc in psutil.process_iter():
        try:
            owner = proc.environ().get(OWNER_VARIABLE, "")
            if owner.startswith(prefix) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def living(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``processes`` still running (pinned by start time: a reused pid is not)."""
    left = []
    for proc in processes:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                left.append(proc)
        except psutil.Error:
            continue
    return left


def owner_of(pid: int) -> str:
    """The process's marker, once its environment can be read.

    A process that has just been started can read as having no environment at all: the
    kernel sets up the new image's environment a moment after the exec has already
    closed the spawner's pipe (and a shell's ``$!`` may name a child that is still
    exec'ing). So wait for the environment to appear, with a deadline.
    """
    deadline = time.monotonic() + 5
    while True:
        environ = psutil.Process(pid).environ()
        if environ or time.monotonic() > deadline:
            return str(environ[OWNER_VARIABLE])
        time.sleep(0.005)


def host_tag_of(record: dict[str, Any]) -> str:
    """The host's tag, as it reported it and as its commands' markers begin."""
    tag = str(record["host_tag"])
    assert _watchdog.HOST_TAG.fullmatch(tag), tag
    for pid in record.get("pids", []):
        assert owner_of(pid).startswith(f"{tag}/env-"), owner_of(pid)
    return tag


def survivors(tag: str, ready: list[psutil.Process]) -> list[str]:
    found = {p.pid: p for p in marked(f"{tag}/")}
    found.update({p.pid: p for p in living(ready)})
    described = []
    for proc in found.values():
        try:
            described.append(f"{proc.pid} {proc.cmdline()!r} {owner_of(proc.pid)}")
        except psutil.Error:
            described.append(str(proc.pid))
    return described


async def poll_until(condition: Callable[[], bool], deadline: float) -> None:
    """Poll ``condition`` (in a thread: the scans are blocking) until it holds or the
    ``time.monotonic()`` deadline passes; the caller asserts afterwards."""
    while time.monotonic() < deadline:
        if await trio.to_thread.run_sync(condition):
            return
        await trio.sleep(0.02)


def pipe_of(pid: int, fd: int) -> str:
    return os.readlink(f"/proc/{pid}/fd/{fd}")


def holders(link: str, pids: list[int]) -> list[int]:
    """Which of ``pids`` hold a descriptor that reads ``link`` (``pipe:[inode]``)."""
    found = []
    for pid in pids:
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for name in names:
            try:
                if os.readlink(f"/proc/{pid}/fd/{name}") == link:
                    found.append(pid)
                    break
            except OSError:
                continue
    return found


def kill_all(processes: list[psutil.Process]) -> None:
    for proc in processes:
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.Error:
            continue


# ---------------------------------------------------------------------- the host


class Host:
    """A running host program and the records it printed."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.records: list[dict[str, Any]] = []
        self._buffer = b""

    async def next_record(self, event: str) -> dict[str, Any]:
        assert self.process.stdout is not None
        with trio.fail_after(START_DEADLINE):
            while True:
                while b"\n" in self._buffer:
                    line, self._buffer = self._buffer.split(b"\n", 1)
                    found = json.loads(line)
                    self.records.append(found)
                    if found["event"] == event:
                        return dict(found)
                chunk = await self.process.stdout.receive_some()
                assert chunk, f"the host ended before {event!r}: {self.records}"
                self._buffer += chunk


@asynccontextmanager
async def host(workspace: Path, mode: str, cmd: str, home: Path) -> AsyncIterator[Host]:
    process = await trio.lowlevel.open_process(
        [sys.executable, str(HOST_PROGRAM), mode, cmd],
        cwd=workspace,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        env={**os.environ, "HOME": str(home)},
    )
    try:
        yield Host(process)
    finally:
        with trio.CancelScope(shield=True):
            process.kill()
            await process.wait()
            if process.stdout is not None:
                await process.stdout.aclose()


async def kill_host(running: Host) -> float:
    """SIGKILL the host; return the deadline of the promise (``time.monotonic()``)."""
    running.process.send_signal(signal.SIGKILL)
    deadline = time.monotonic() + PROMISE
    await running.process.wait()
    return deadline


async def expect_swept(tag: str, ready: list[psutil.Process], deadline: float) -> None:
    await poll_until(lambda: not survivors(tag, ready), deadline)
    left = await trio.to_thread.run_sync(survivors, tag, ready)
    kill_all([*marked(f"{tag}/"), *ready])
    assert left == [], f"alive {PROMISE} s after the host's SIGKILL: {left}"


def watchdog_of(record: dict[str, Any]) -> psutil.Process:
    watchdog = psutil.Process(record["watchdog"])
    assert watchdog.ppid() == record["host"]
    assert "_watchdog.py" in " ".join(watchdog.cmdline())
    return watchdog


# ---------------------------------------------------------------------- the tests


@pytest.mark.parametrize("mode", ["foreground", "background"])
@pytest.mark.parametrize("kind", list(STUBBORN))
async def test_9_4_a_killed_host_leaves_nothing_running(
    tmp_path: Path, hermetic_home: Path, kind: str, mode: str
) -> None:
    async with host(tmp_path, mode, STUBBORN[kind], hermetic_home) as running:
        ready_record = await running.next_record("ready")
        tag = host_tag_of(ready_record)
        ready = [psutil.Process(pid) for pid in ready_record["pids"]]
        watchdog = watchdog_of(ready_record)
        assert await trio.to_thread.run_sync(marked, f"{tag}/")
        deadline = await kill_host(running)
        await expect_swept(tag, ready, deadline)
        # The watchdog ends once its sweep is done.
        await poll_until(lambda: not living([watchdog]), time.monotonic() + PROMISE)
        assert not living([watchdog]), "the watchdog outlived its sweep"


async def test_9_4_a_killed_host_s_escapee_without_a_marker_ends_with_its_cgroup(
    tmp_path: Path,
    hermetic_home: Path,
    cgroups: Path,
    escapees: list[int],
) -> None:
    # No sweep can find it (no group, tree nor marker); the host's cgroup holds it, and
    # the watchdog kills and removes the host's cgroups once the host is gone. The host
    # inherits PENGUIN_CGROUPS=1 (the cgroups fixture).
    cmd = f'{AS_A_MEMBER}{ESCAPE} >/dev/null; echo "ready $$"; sleep 1000'
    async with host(tmp_path, "foreground", cmd, hermetic_home) as running:
        ready_record = await running.next_record("ready")
        tag = host_tag_of(ready_record)
        escapees.append(escapee := int((tmp_path / "escapee.pid").read_text()))
        ours = penguin_cgroups(cgroups, tag)
        assert cgroup_of(escapee).rsplit("/", 1)[-1] in ours
        assert OWNER_VARIABLE not in psutil.Process(escapee).environ()
        deadline = await kill_host(running)
        await poll_until(lambda: not living([psutil.Process(escapee)]), deadline)
        assert not alive(escapee), f"alive {PROMISE} s after the host's SIGKILL"
        await poll_until(lambda: not (ours & penguin_cgroups(cgroups)), deadline + PROMISE)
        assert not (ours & penguin_cgroups(cgroups)), "the host's cgroup was left behind"


async def test_9_4_the_watchdog_holds_only_the_link_and_stands_apart(
    tmp_path: Path, hermetic_home: Path
) -> None:
    async with host(tmp_path, "background", STUBBORN["trap_term"], hermetic_home) as running:
        ready_record = await running.next_record("ready")
        tag = host_tag_of(ready_record)
        host_pid, watchdog = ready_record["host"], watchdog_of(ready_record)
        # Its own session and group: no terminal signal, no killpg of the host's reaches it.
        assert os.getsid(watchdog.pid) == watchdog.pid != os.getsid(host_pid)
        assert os.getpgid(watchdog.pid) not in (os.getpgid(host_pid), os.getpgid(os.getpid()))
        # Standard input is the link; the output goes nowhere (the host's stays the host's).
        link = pipe_of(watchdog.pid, 0)
        assert link.startswith("pipe:")
        assert stat.S_ISFIFO(os.stat(f"/proc/{watchdog.pid}/fd/0").st_mode)
        assert pipe_of(watchdog.pid, 1) == pipe_of(watchdog.pid, 2) == os.devnull
        assert sorted(int(fd) for fd in os.listdir(f"/proc/{watchdog.pid}/fd")) == [0, 1, 2]
        assert OWNER_VARIABLE not in watchdog.environ()
        assert watchdog.cwd() == "/"
        # The write end is the host's alone: not one of its commands inherited it.
        commands = [p.pid for p in marked(f"{tag}/")]
        assert commands
        assert holders(link, [host_pid, *commands]) == [host_pid]
        deadline = await kill_host(running)
        await expect_swept(tag, [], deadline)


async def test_9_4_a_host_killed_mid_kill_leaves_nothing(
    tmp_path: Path, hermetic_home: Path
) -> None:
    async with host(tmp_path, "mid_kill", STUBBORN["trap_term"], hermetic_home) as running:
        ready_record = await running.next_record("ready")
        tag = host_tag_of(ready_record)
        ready = [psutil.Process(pid) for pid in ready_record["pids"]]
        await running.next_record("killing")  # inside kill_command's grace period
        deadline = await kill_host(running)
        await expect_swept(tag, ready, deadline)


async def test_9_4_a_host_killed_while_spawning_leaves_nothing(
    tmp_path: Path, hermetic_home: Path
) -> None:
    cmd = "trap '' TERM; ( setsid sleep 1000 & ); sleep 1000"
    async with host(tmp_path, "spawn_loop", cmd, hermetic_home) as running:
        first = await running.next_record("spawned")
        assert "process_id proc-" in first["output"], first
        tag = host_tag_of(first)
        await running.next_record("spawned")
        await running.next_record("spawned")  # the fourth launch is under way
        deadline = await kill_host(running)
        await expect_swept(tag, [], deadline)


async def test_9_4_a_forked_child_neither_holds_the_link_nor_counts(
    tmp_path: Path, hermetic_home: Path
) -> None:
    async with host(tmp_path, "fork", STUBBORN["daemon"], hermetic_home) as running:
        forked = await running.next_record("forked")
        ready_record = await running.next_record("ready")
        tag = host_tag_of(ready_record)
        child = psutil.Process(forked["child"])
        try:
            watchdog = watchdog_of(ready_record)
            # The child has a tag of its own, and no copy of the host's write end: the
            # one that already exited changed nothing, the one alive hides no death.
            assert forked["child_tag"] != tag
            assert _watchdog.HOST_TAG.fullmatch(forked["child_tag"])
            link = pipe_of(watchdog.pid, 0)
            assert holders(link, [ready_record["host"], child.pid]) == [ready_record["host"]]
            assert not alive(forked["quick"])
            assert living([watchdog])
            assert await trio.to_thread.run_sync(marked, f"{tag}/")
            deadline = await kill_host(running)
            await expect_swept(tag, [], deadline)
            assert living([child]), "the watchdog killed the host's unmarked child"
        finally:
            kill_all([child])


async def test_9_4_the_watchdog_kills_only_its_host_s_marked_processes(
    tmp_path: Path, hermetic_home: Path
) -> None:
    async with host(tmp_path, "background", STUBBORN["trap_term"], hermetic_home) as running:
        ready_record = await running.next_record("ready")
        tag = host_tag_of(ready_record)
        watchdog = watchdog_of(ready_record)
        other = "host-" + ("0" if tag[5] != "0" else "1") * 12
        decoy_markers = {
            "another host": f"{other}/env-000000000000/proc-00000000",
            "a longer tag": f"{tag}0/env-000000000000/proc-00000000",
            "the bare tag": tag,
            "no marker": None,
        }
        decoys: dict[str, trio.Process] = {}
        try:
            for name, owner in decoy_markers.items():
                env = {k: v for k, v in os.environ.items() if k != OWNER_VARIABLE}
                if owner is not None:
                    env[OWNER_VARIABLE] = owner
                decoys[name] = await trio.lowlevel.open_process(
                    ["sleep", "1000"], env=env, start_new_session=True
                )
            deadline = await kill_host(running)
            await expect_swept(tag, [], deadline)
            # The watchdog's exit is the end of its sweep: what is alive now, it spared.
            await poll_until(lambda: not living([watchdog]), time.monotonic() + PROMISE)
            assert not living([watchdog]), "the watchdog outlived its sweep"
            spared = {name for name, proc in decoys.items() if proc.poll() is None}
            assert spared == set(decoys)
        finally:
            with trio.CancelScope(shield=True):
                for proc in decoys.values():
                    proc.kill()
                    await proc.wait()


async def test_9_4_penguin_run_killed_mid_command_leaves_nothing(
    tmp_path: Path, hermetic_home: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    cmd = (
        "trap '' TERM; ( setsid sleep 1000 & echo $! > daemon.pid ); "
        'sleep 1000 & echo "$!" > job.pid; mv daemon.pid ready.pid; wait'
    )
    replies = iter(
        [tool_call_reply("call_a", "exec_command", {"description": "stubborn", "cmd": cmd})]
    )
    async with t.serve_openai_compatible(lambda request: next(replies)) as server:
        configure_model(tmp_path / "root", server.base_url)
        process = await trio.lowlevel.open_process(
            [
                sys.executable,
                "-m",
                "penguin",
                "run",
                "-m",
                "Start the job",
                "--workspace",
                str(workspace),
                "--root",
                str(tmp_path / "root"),
            ],
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "HOME": str(hermetic_home)},
        )
        try:
            ready_file = workspace / "ready.pid"
            with trio.fail_after(START_DEADLINE):
                while not ready_file.exists():  # noqa: ASYNC110 - a file, no event to wait on
                    await trio.sleep(0.02)
            pids = [int(ready_file.read_text()), int((workspace / "job.pid").read_text())]
            ready = [psutil.Process(pid) for pid in pids]
            tag = owner_of(pids[0]).split("/")[0]
            assert _watchdog.HOST_TAG.fullmatch(tag), tag
            watchdogs = [
                p
                for p in psutil.Process(process.pid).children()
                if "_watchdog.py" in " ".join(p.cmdline())
            ]
            assert len(watchdogs) == 1, watchdogs
            assert await trio.to_thread.run_sync(marked, f"{tag}/")
            process.send_signal(signal.SIGKILL)
            deadline = time.monotonic() + PROMISE
            await process.wait()
            await expect_swept(tag, ready, deadline)
            await poll_until(lambda: not living(watchdogs), time.monotonic() + PROMISE)
            assert not living(watchdogs), "the watchdog outlived its sweep"
        finally:
            with trio.CancelScope(shield=True):
                process.kill()
                await process.wait()


# ---------------------------------------------------------------------- the sweep itself


HIGH_FD_HOST: Final = """
import os, resource, sys, time
from penguin.environment.supervisor import _watchdog
read_end, write_end = os.pipe()
os.dup2(read_end, 200)  # inheritable, as a shell passes what it holds
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))  # ulimit -n lowered below it
watchdog = _watchdog.host_watchdog()
watchdog.start()
deadline = time.monotonic() + 30
while time.monotonic() < deadline:  # until it closed, as it starts, what it got
    held = sorted(int(fd) for fd in os.listdir(f"/proc/{watchdog.pid}/fd"))
    if held == [0, 1, 2]:
        break
    time.sleep(0.01)
print(held, flush=True)
"""


def test_9_4_a_descriptor_above_a_lowered_limit_neither_stops_the_watchdog_nor_stays_in_it() -> (
    None
):
    done = subprocess.run(
        [sys.executable, "-c", HIGH_FD_HOST],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr  # before: posix_spawn's EBADF, no watchdog
    assert done.stdout.splitlines() == ["[0, 1, 2]"], done.stderr


def test_9_4_the_sweep_kills_by_identity_and_by_marker_only() -> None:
    tag = "host-" + os.urandom(6).hex()
    env = {k: v for k, v in os.environ.items() if k != OWNER_VARIABLE}
    owners = {
        "ours": f"{tag}/env-000000000000/proc-00000001",
        "ours too": f"{tag}/env-111111111111/proc-00000002",
        "another host": "host-" + os.urandom(6).hex() + "/env-000000000000/proc-00000001",
        "a longer tag": f"{tag}f/env-000000000000/proc-00000001",
        "none": None,
    }
    started: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name, owner in owners.items():
            child_env = dict(env) if owner is None else {**env, OWNER_VARIABLE: owner}
            started[name] = subprocess.Popen(["sleep", "1000"], env=child_env)
        # A stale identity (the right pid, another start time) is never signalled.
        ours = started["ours"]
        assert _watchdog.kill_process((ours.pid, -1.0)) is False
        assert ours.poll() is None
        # Processes that started before the host (here: before "inf") are not looked at.
        assert _watchdog.sweep(tag, float("inf")) == []
        assert ours.poll() is None
        killed = _watchdog.sweep(tag, 0.0)
        assert sorted(pid for pid, _ in killed) == sorted(
            [started["ours"].pid, started["ours too"].pid]
        )
        for name in ("ours", "ours too"):
            assert started[name].wait(timeout=5) == -signal.SIGKILL
        for name in ("another host", "a longer tag", "none"):
            assert started[name].poll() is None, name
        with pytest.raises(ValueError, match="not a host tag"):
            _watchdog.sweep("", 0.0)
    finally:
        for proc in started.values():
            proc.kill()
            proc.wait()


def test_9_4_the_watchdog_refuses_to_sweep_without_a_link() -> None:
    # Standard input that is no pipe: it never sweeps on a guess, it exits at once.
    done = subprocess.run(
        [sys.executable, _watchdog.__file__, "host-" + "0" * 12, "0"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    bad_tag = subprocess.run(
        [sys.executable, _watchdog.__file__, "env-0", "0"],
        stdin=subprocess.PIPE,
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert bad_tag.returncode == 2


async def test_9_4_every_marker_begins_with_the_host_tag(env: penguin.Environment) -> None:
    watchdog = _watchdog.host_watchdog()
    tag = watchdog.tag()
    assert _watchdog.HOST_TAG.fullmatch(tag)
    assert env._commands.tag.startswith(f"{tag}/env-")
    out = await env.call_tool(
        om.tool_call("exec_command", {"description": "marker", "cmd": "echo $PENGUIN_OWNER"}, "c")
    )
    assert out.payload.output.startswith(f"{env._commands.tag}/proc-"), out.payload.output
    # The first command started the host's watchdog; it runs until the host is gone.
    assert watchdog.running()
    assert psutil.Process(watchdog.pid).ppid() == os.getpid()
