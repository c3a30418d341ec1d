"""The spawner that starts sandboxed commands inside their namespaces (spec/sandbox.md X4.1).

Real commands, real processes: a command's parent is the layout's spawner (not
penguin), it has no capability it could use against the mounts, its exit status is
what it exited with, and the spawner ends with the Environment. A spawner that died
is replaced before the next command; a command too large for the spawner's message
enters the namespaces with ``nsenter`` and is just as confined.
"""

from __future__ import annotations

import contextlib
import json
import marshal
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import penguin
from penguin.environment.sandbox import _linux, _spawner

from ..processes import alive, spawned_tasks, wait_gone
from ..supervisor.test_cgroup import ESCAPE, cgroup_of, own_cgroups
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


# ------------------------------------------------------------ the spawner's start, as Popen's
#
# The spawner starts a command with os.posix_spawn (its start-up imports no
# subprocess, json nor typing: 35 -> 15 ms of CPU per sandbox); these tests run it
# outside any namespace, beside subprocess.Popen given the same request.


@contextlib.contextmanager
def _bare_spawner(without_stdin: bool = False) -> Iterator[_linux._Spawner]:
    near, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    closing = ["/bin/sh", "-c", 'exec 0<&- "$@"', "sh"] if without_stdin else []
    process = subprocess.Popen(
        [*closing, *_linux._SPAWNER_ARGV, str(far.fileno())],
        pass_fds=(far.fileno(),),
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    far.close()
    assert process.stdout is not None
    assert process.stdout.readline() == b"ready\n"
    process.stdout.close()
    spawner = _linux._Spawner(process, near, process.pid)
    try:
        yield spawner
    finally:
        spawner.close()
    assert process.returncode == 0


def _outcome(error: BaseException) -> tuple[object, ...]:
    if isinstance(error, OSError):
        return ("OSError", error.errno, error.strerror, error.filename, str(error))
    return (type(error).__name__, str(error))


async def _both(
    spawner: _linux._Spawner,
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    executable: str | None = None,
) -> tuple[tuple[object, ...], tuple[object, ...]]:
    """What the spawner and Popen make of one request: an error, or the exit and output."""
    results: list[tuple[object, ...]] = []
    for boxed in (True, False):
        read, write = os.pipe()
        try:
            if boxed:
                child = await spawner.start(argv, executable, cwd, env, (0, write, write), False)
                assert child is not None
                os.close(write)
                status = await child.wait()
            else:
                process = await trio.lowlevel.open_process(  # Popen, in a thread
                    argv,
                    executable=executable,
                    cwd=cwd,
                    env=env,
                    stdout=write,
                    stderr=write,
                    start_new_session=True,
                )
                os.close(write)
                status = await process.wait()
            with os.fdopen(read, "rb") as output:
                results.append(("ran", status, output.read()))
        except (OSError, ValueError) as error:
            os.close(read)
            with contextlib.suppress(OSError):
                os.close(write)
            results.append(_outcome(error))
    return results[0], results[1]


async def test_x4_1_the_spawner_starts_a_command_as_popen_does(tmp_path: Path) -> None:
    first, second, home = tmp_path / "first", tmp_path / "second", tmp_path / "home"
    for folder in (first, second, home):
        folder.mkdir()
    (first / "tool").write_text("#!/bin/sh\necho not executable\n")  # no x bit: skipped
    (second / "tool").write_text('#!/bin/sh\necho "second $0 $1 $(pwd)"; exit 3\n')
    (second / "tool").chmod(0o755)
    (home / "plain").write_text("data\n")
    path = {"PATH": f"{first}:{second}"}
    cwd = str(home)
    cases: list[tuple[list[str], str, dict[str, str], str | None]] = [
        (["tool", "x"], cwd, path, None),  # PATH: the first that runs
        (["tool"], cwd, {"PATH": str(first)}, None),  # only a file without x: EACCES
        (["tool"], cwd, {"PATH": f"{first}:{home}"}, None),  # EACCES, then ENOENT: EACCES
        (["no-such-tool"], cwd, path, None),  # ENOENT, named as asked
        ([str(home / "plain")], cwd, path, None),  # a path: EACCES, that path
        ([str(home / "none")], cwd, path, None),
        (["named", "-c", "echo $0; exit 4"], cwd, path, "/bin/sh"),  # executable and argv[0]
        (["sh", "-c", "exit 0"], str(home / "gone"), path, None),  # cwd: ENOENT, the cwd
        (["sh", "-c", "exit 0"], str(home / "plain"), path, None),  # cwd: ENOTDIR
        (["sh", "-c", "echo a\0b"], str(home / "gone"), path, None),  # NUL before cwd
        (["sh", "-c", "exit 0"], cwd, {**path, "A=B": "1"}, None),
        (["sh", "-c", "exit 0"], cwd, {**path, "A": "x\0y"}, None),
        (["sh", "-c", "exit 0"], cwd, {**path, "A\0": "y"}, None),
        (["/bin/sh", "-c", "exit 0"], cwd + "\0", path, None),
    ]
    with _bare_spawner() as spawner:
        for argv, where, env, executable in cases:
            boxed, popen = await _both(spawner, argv, where, env, executable)
            assert boxed == popen, (argv, where, executable)
        ran, _ = await _both(spawner, ["tool", "x"], cwd, path)
        assert ran == ("ran", 3, f"second {second / 'tool'} x {home}\n".encode())


async def test_x4_1_a_spawned_command_inherits_stdio_only_in_a_session_of_its_own(
    tmp_path: Path,
) -> None:
    # Each figure is read by a command of its own, from /proc/self, with no shell: a
    # shell holds descriptors of its own for a moment as it starts a pipeline or a
    # redirection, and blocks every signal while it forks.
    with _bare_spawner() as spawner:
        fds = await _both(spawner, ["ls", "/proc/self/fd"], str(tmp_path), {})
        signals = await _both(
            spawner, ["grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"], str(tmp_path), {}
        )
        stat = await _both(spawner, ["cat", "/proc/self/stat"], str(tmp_path), {})
    # ls's one descriptor of its own is its handle on the folder: 3 when nothing else
    # was inherited, as in Popen's child.
    assert fds[0] == fds[1] == ("ran", 0, b"0\n1\n2\n3\n")
    boxed, popen = (bytes(side[2]).decode().split() for side in signals)  # type: ignore[call-overload]
    assert signals[0][:2] == signals[1][:2] == ("ran", 0)
    assert boxed[:2] == popen[:2] == ["SigBlk:", "0000000000000000"]  # no signal blocked
    # No signal ignored, as in Popen's child (SIGPIPE and SIGXFSZ, which Python ignores,
    # back at their default), but for the C library's two internal ones: glibc's
    # posix_spawn leaves 32 and 33 ignored, which its programs take back when needed.
    assert popen[2:] == ["SigIgn:", "0000000000000000"]
    assert boxed[2] == "SigIgn:"
    assert int(boxed[3], 16) & ~(1 << 31 | 1 << 32) == 0
    fields = bytes(stat[0][2]).rsplit(b")", 1)[1].split()  # type: ignore[call-overload]
    pid = bytes(stat[0][2]).split()[0]  # type: ignore[call-overload]
    assert stat[0][:2] == ("ran", 0)
    assert fields[3] == pid  # its session is its own (stat field 6, the session id)


async def test_x4_1_a_spawner_started_without_stdin_still_gives_each_command_its_own(
    tmp_path: Path,
) -> None:
    # A descriptor received while the spawner's fd 0 were free would land there, and
    # the command's stdin would be put on top of it. The spawner fills a hole in its
    # stdio at start (and its epoll descriptor would take one too): whatever keeps it
    # filled, a command gets the stdin it was given, and nothing more.
    read, write = os.pipe()
    out_read, out_write = os.pipe()
    with _bare_spawner(without_stdin=True) as spawner:
        child = await spawner.start(
            ["/bin/sh", "-c", "cat; exec ls /proc/self/fd"],  # 3: ls's handle on the folder
            None,
            str(tmp_path),
            {},
            (read, out_write, out_write),
            False,
        )
        assert child is not None
        for fd in (read, out_write):
            os.close(fd)
        os.write(write, b"from the pipe\n")
        os.close(write)
        assert await child.wait() == 0
    with os.fdopen(out_read, "rb") as output:
        assert output.read() == b"from the pipe\n0\n1\n2\n3\n"


@pytest.mark.parametrize(
    "text",
    ["", "plain", 'a "quoted" \\ back', "tab\tnew\nline\x00\x1f\x7f", "é中\U0001f600", "\udcff"],
)
def test_x4_1_the_spawners_replies_are_json_as_json_writes_it(text: str) -> None:
    value: dict[str, int | str | None] = {"errno": 2, "error": text, "filename": None}
    assert _spawner.encoded(value) == json.dumps(value).encode()
    assert _spawner.encoded({"status": -9}) == b'{"status": -9}'
    assert json.loads(_spawner.encoded({"error": text, "value": True}))["error"] == text


@pytest.mark.parametrize(
    "data",
    [b"", b"not marshal", marshal.dumps([1, 2]), marshal.dumps({"argv": ["true"]})],
)
def test_x4_1_a_start_request_the_spawner_cannot_read_is_refused(data: bytes) -> None:
    with pytest.raises(LookupError):
        _spawner._start(data, [0, 1, 2])


async def test_x4_1_a_sandboxed_command_is_in_its_cgroup_from_its_first_instruction(
    tmp_path: Path, cgroups: Path, escapees: list[int]
) -> None:
    # Its spawner was placed before it started anything, so a command that escapes at
    # once (no wait to be placed, as unsandboxed commands need) is a member too.
    before = own_cgroups(cgroups)
    async with sandboxed(tmp_path) as env:
        first = await call(env, "exec_command", cmd="cat /proc/self/cgroup")
        out = await call(env, "exec_command", cmd=ESCAPE)  # at once: no wait to be placed
        assert out.stop_reason == "completed", out.output
        escapees.append(pid := int(out.output))
        assert alive(pid)
        assert cgroup_of(pid) == next(
            line[3:] for line in first.output.splitlines() if line.startswith("0::")
        )
        assert cgroup_of(pid).rsplit("/", 1)[-1].startswith("penguin-host-")
    await wait_gone([pid])
    assert own_cgroups(cgroups) == before
