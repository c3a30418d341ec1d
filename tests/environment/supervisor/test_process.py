"""Process trees: the process table, identity-checked signals and ending a tree (reference 4.11).

The table's questions are pure and tested on made-up entries; reading it, signalling
and ending trees use real processes. The stubborn trees against every route a session
ends by are in ``tests/environment/test_chaos.py``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import psutil
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from penguin._mounts import on_local_disk
from penguin.environment.supervisor import _process, _proctable
from penguin.environment.supervisor._process import (
    PIPE_SIZE,
    SpawnedProcess,
    end_process_tree,
    kill_marked,
    spawn_process,
)
from penguin.environment.supervisor._proctable import (
    OWNER_VARIABLE,
    PidMark,
    ProcessEntry,
    ProcessTable,
    is_alive,
    read_process_table,
    send_signal,
)

from ..processes import wait_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups")


def entry(
    pid: int,
    ppid: int = 1,
    pgid: int | None = None,
    *,
    zombie: bool = False,
    owner: str | None = None,
) -> ProcessEntry:
    return ProcessEntry(pid, ppid, pid if pgid is None else pgid, 100.0 + pid, zombie, owner)


# --------------------------------------------------------------------------- the table


def test_descendants_walk_through_a_zombie_but_never_return_one() -> None:
    table = ProcessTable(
        (
            entry(10),
            entry(11, 10, 10),
            entry(12, 11, 10, zombie=True),
            entry(13, 12, 13),  # a child of the zombie (not reparented yet)
            entry(20, 1),
        )
    )
    assert sorted(e.pid for e in table.descendants(10)) == [11, 13]
    assert table.descendants(20) == []
    assert table.descendants(99) == []


def test_group_and_marked_ignore_zombies() -> None:
    table = ProcessTable(
        (
            entry(10, owner="env-a/proc-1"),
            entry(11, 10, 10, owner="env-a/proc-1"),
            entry(12, 1, 10, zombie=True, owner=None),
            entry(13, 1, 13, owner="env-a/proc-2"),
            entry(14, 1, 14, owner="env-b/proc-1"),
            entry(15, 1, 15, zombie=True, owner="env-a/proc-1"),
        )
    )
    assert [e.pid for e in table.group(10)] == [10, 11]
    assert [e.pid for e in table.marked("env-a/proc-1")] == [10, 11]
    assert [e.pid for e in table.marked("env-a/", prefix=True)] == [10, 11, 13]
    assert table.marked("env-a/proc-") == []  # exact unless asked for a prefix


@given(st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=30))
def test_descendants_match_a_naive_walk(parents: list[int]) -> None:
    # Process i + 100 has parent parents[i] + 100 when that is an earlier process.
    entries = [
        entry(i + 100, parents[i] + 100 if parents[i] < i else 1) for i in range(len(parents))
    ]
    table = ProcessTable(tuple(entries))
    root = 100
    naive: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {e.pid for e in entries if e.ppid in frontier} - naive
        naive |= frontier
    assert sorted(e.pid for e in table.descendants(root)) == sorted(naive)


def test_the_owner_marker_is_found_anywhere_in_the_environment() -> None:
    key = OWNER_VARIABLE.encode()
    assert _proctable._owner_in(key + b"=env-a/proc-1\0A=1\0") == "env-a/proc-1"
    assert _proctable._owner_in(b"A=1\0" + key + b"=env-a/proc-2\0") == "env-a/proc-2"
    assert _proctable._owner_in(b"A=1\0" + key + b"=env-a/proc-3") == "env-a/proc-3"
    assert _proctable._owner_in(b"A=1\0X" + key + b"=forged\0") is None
    assert _proctable._owner_in(b"") is None


def test_after_the_root_is_reaped_an_unmarked_group_member_is_waited_for_not_signalled() -> None:
    # Once the leader is reaped its pid, the group id, may be reused by a stranger.
    exited = trio.Event()
    ending = _process._Ending(10, 10, "env-a/proc-1", exited)
    table = ProcessTable(
        (
            entry(11, 1, 10, owner=None),
            entry(12, 1, 10, owner="env-a/proc-1"),
            entry(13, 10, 13, owner=None),
        )
    )
    assert sorted(e.pid for e in ending.ours(table)) == [11, 12, 13]
    exited.set()
    assert [e.pid for e in ending.ours(table)] == [12]
    assert sorted(e.pid for e in ending.remaining(table)) == [11, 12]


# --------------------------------------------------------------------------- real processes


@pytest.fixture(params=["procfs", "psutil"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test through /proc (Linux) and through psutil (every other POSIX system)."""
    if request.param == "procfs" and not _proctable._PROCFS:
        pytest.skip("no /proc")
    monkeypatch.setattr(_proctable, "_PROCFS", request.param == "procfs")
    return str(request.param)


def marked_env(owner: str) -> dict[str, str]:
    return {**os.environ, OWNER_VARIABLE: owner}


def table_entry(pid: int) -> ProcessEntry:
    for found in read_process_table().entries:
        if found.pid == pid:
            return found
    raise AssertionError(f"pid {pid} is not in the process table")


def test_the_table_shows_markers_groups_and_zombies(backend: str) -> None:
    child = subprocess.Popen(
        ["sleep", "1000"], env=marked_env("env-t/proc-1"), start_new_session=True
    )
    dead = subprocess.Popen(["true"])
    try:
        os.waitid(os.P_PID, dead.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
        found = table_entry(child.pid)
        assert found.owner == "env-t/proc-1"
        assert found.pgid == child.pid
        assert found.ppid == os.getpid()
        assert not found.zombie
        assert is_alive(found)
        zombie = table_entry(dead.pid)
        assert zombie.zombie
        assert not is_alive(zombie)
        assert os.getpid() not in {e.pid for e in read_process_table().entries}
    finally:
        child.kill()
        child.wait()
        dead.wait()


def test_markers_are_read_only_for_processes_no_older_than_asked(backend: str) -> None:
    child = subprocess.Popen(["sleep", "1000"], env=marked_env("env-f/proc-1"))
    try:
        started = table_entry(child.pid).started
        assert _proctable.start_of(child.pid) == started

        def owner_seen(newer_than: float) -> str | None:
            found = read_process_table(newer_than).entries
            return next(e.owner for e in found if e.pid == child.pid)

        # Just after the exec the new image's environment can still read as empty (the
        # kernel sets it up after the spawner's pipe closed): wait for it, with a deadline.
        deadline = time.monotonic() + 5
        while owner_seen(started) is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert owner_seen(started) == "env-f/proc-1"
        assert owner_seen(started + 1) is None
    finally:
        child.kill()
        child.wait()


def test_a_signal_never_reaches_a_process_that_reused_the_pid(backend: str) -> None:
    child = subprocess.Popen(["sleep", "1000"])
    try:
        seen = table_entry(child.pid)
        impostor = ProcessEntry(
            seen.pid, seen.ppid, seen.pgid, seen.started - 1, seen.zombie, seen.owner
        )
        assert not send_signal(impostor, signal.SIGKILL)
        assert not is_alive(impostor)
        assert child.poll() is None
        assert send_signal(seen, signal.SIGKILL)
        assert child.wait() == -signal.SIGKILL
        assert not send_signal(seen, signal.SIGKILL)  # reaped: gone
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_kill_marked_kills_by_exact_owner_or_prefix_only(backend: str) -> None:
    tag = f"env-k{os.getpid()}"
    mine = subprocess.Popen(["sleep", "1000"], env=marked_env(f"{tag}/proc-1"))
    sibling = subprocess.Popen(["sleep", "1000"], env=marked_env(f"{tag}/proc-2"))
    stranger = subprocess.Popen(["sleep", "1000"], env=marked_env(f"{tag}x/proc-1"))
    try:
        assert kill_marked(f"{tag}/proc-1", prefix=False) == 1
        assert mine.wait() == -signal.SIGKILL
        assert sibling.poll() is None
        assert kill_marked(f"{tag}/", prefix=True) == 1
        assert sibling.wait() == -signal.SIGKILL
        assert stranger.poll() is None
        assert kill_marked(f"{tag}/", prefix=True) == 0
    finally:
        for proc in (mine, sibling, stranger):
            if proc.poll() is None:
                proc.kill()
            proc.wait()


async def test_the_output_pipe_is_enlarged(tmp_path: Path) -> None:
    spawned = await spawn_process(["true"], cwd=tmp_path, env=dict(os.environ), tty=False)
    try:
        size = fcntl.fcntl(spawned.output.fileno(), getattr(fcntl, "F_GETPIPE_SZ", 1032))
        assert size in (PIPE_SIZE, 65536)  # 65536 where the user's pipe budget is spent
    finally:
        await spawned.process.wait()
        await spawned.output.aclose()
        await spawned.stdin.aclose()


@pytest.mark.parametrize("tty", [False, True])
async def test_20_5_the_roots_start_bound_is_taken_before_the_spawn(
    tmp_path: Path, tty: bool
) -> None:
    # A clock bound, not a read of the new root's /proc/<pid>/stat (that read waits
    # for its exec to finish, on the loop's thread). It must never exceed the root's
    # real start time, or a marked descendant could be passed over by a sweep.
    before = _proctable.started_from_now()
    spawned = await spawn_process(["sleep", "5"], cwd=tmp_path, env=dict(os.environ), tty=tty)
    try:
        assert 0 < before <= spawned.root_started <= _proctable.start_of(spawned.pid)
    finally:
        os.killpg(spawned.pgid, signal.SIGKILL)
        await spawned.process.wait()
        await spawned.output.aclose()
        await spawned.stdin.aclose()


@asynccontextmanager
async def started(
    tmp_path: Path, script: str, owner: str
) -> AsyncIterator[tuple[SpawnedProcess, trio.Event, list[int]]]:
    """Spawn ``bash -c script``, watch its root, and wait for its ``ready <pids>`` line."""
    spawned = await spawn_process(
        ["bash", "-c", script], cwd=tmp_path, env=marked_env(owner), tty=False
    )
    exited = trio.Event()

    async def watch() -> None:
        await spawned.process.wait()
        exited.set()

    text = b""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        with trio.fail_after(10):
            while b"\n" not in text:
                text += await spawned.output.receive_some(4096)
        line = text.decode().split("\n", 1)[0]
        assert line.startswith("ready"), line
        yield spawned, exited, [int(p) for p in line.split()[1:]]
    await spawned.output.aclose()
    await spawned.stdin.aclose()


def _gone(pids: list[int]) -> bool:
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True


async def test_end_process_tree_kills_what_ignores_sigterm_and_what_escaped(
    tmp_path: Path, backend: str
) -> None:
    owner = f"env-e{os.getpid()}/proc-1"
    script = (
        "trap '' TERM; setsid sleep 1000 & a=$!; ( setsid sleep 1000 & echo $! > daemon ); "
        'sleep 1000 & echo "ready $a $(cat daemon) $!"; wait'
    )
    async with started(tmp_path, script, owner) as (spawned, exited, pids):
        start = trio.current_time()
        with trio.fail_after(10):
            await end_process_tree(spawned, owner, exited, grace=0.2)
        assert trio.current_time() - start >= 0.2  # SIGTERM was ignored: SIGKILL after grace
        assert exited.is_set()
        assert _gone([spawned.pid, *pids])
        assert read_process_table().marked(owner) == []


async def test_20_1_a_what_an_exited_command_left_is_found_among_the_pids_given_since_it_started(
    tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = f"env-m{os.getpid()}/proc-1"
    # The root leaves a marked daemon (another session, reparented) and a group member.
    script = '( setsid sleep 1000 & echo $! > daemon ); sleep 1000 & echo "ready $(cat daemon) $!"'
    since: list[PidMark | Sequence[PidMark] | None] = []
    real = _proctable.read_process_table

    def observed(
        newer_than: float = 0.0, mark: PidMark | Sequence[PidMark] | None = None
    ) -> ProcessTable:
        since.append(mark)
        return real(newer_than, mark)

    monkeypatch.setattr(_proctable, "read_process_table", observed)
    async with started(tmp_path, script, owner) as (spawned, exited, pids):
        with trio.fail_after(10):
            await exited.wait()
            await end_process_tree(spawned, owner, exited, grace=0.2)
        assert _gone(pids)
    if backend == "procfs":
        assert spawned.mark is not None
        assert since[0] == (spawned.mark,)  # the first read: the pids given since the spawn
    else:
        assert spawned.mark is None
        assert since[0] is None


async def test_end_process_tree_is_quick_when_sigterm_is_obeyed(
    tmp_path: Path, backend: str
) -> None:
    owner = f"env-q{os.getpid()}/proc-1"
    script = 'sleep 1000 & a=$!; setsid sleep 1000 & echo "ready $a $!"; wait'
    async with started(tmp_path, script, owner) as (spawned, exited, pids):
        with trio.fail_after(10):
            await end_process_tree(spawned, owner, exited, grace=5.0)
        assert _gone([spawned.pid, *pids])


async def test_concurrent_table_reads_are_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = 0
    gate = threading.Event()

    def counted(
        newer_than: float = 0.0, since: PidMark | Sequence[PidMark] | None = None
    ) -> ProcessTable:
        nonlocal reads
        reads += 1
        number = reads
        gate.wait(10)
        return ProcessTable((entry(number),))  # the table says which read it was

    monkeypatch.setattr(_proctable, "read_process_table", counted)
    scan = _proctable._SharedScan()
    got: dict[str, int] = {}

    async def read(name: str) -> None:
        got[name] = (await scan.read()).entries[0].pid

    async with trio.open_nursery() as nursery:
        for i in range(20):
            nursery.start_soon(read, f"early{i}")
        await trio.testing.wait_all_tasks_blocked()  # the first read is under way
        for i in range(20):
            nursery.start_soon(read, f"late{i}")
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
    # Callers that asked before a read began share it; those that asked while it ran
    # share the next one: never a read that began before they asked.
    assert reads == 2
    assert {got[f"early{i}"] for i in range(20)} == {1}
    assert {got[f"late{i}"] for i in range(20)} == {2}


async def test_gathered_reads_share_one_walk_and_never_a_stale_one(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    reads = 0

    def counted(
        newer_than: float = 0.0, since: PidMark | Sequence[PidMark] | None = None
    ) -> ProcessTable:
        nonlocal reads
        reads += 1
        filters.append(newer_than)
        return ProcessTable((entry(reads),))

    monkeypatch.setattr(_proctable, "read_process_table", counted)
    scan = _proctable._SharedScan()
    got: list[int] = []
    filters: list[float] = []

    async def read(newer_than: float) -> None:
        got.append((await scan.read_gathered(0.05, newer_than)).entries[0].pid)

    async with trio.open_nursery() as nursery:
        for since in (50.0, 30.0, 70.0, 40.0, 60.0):  # arriving one after another
            nursery.start_soon(read, since)
            await trio.sleep(0.005)
        await trio.sleep(0.001)
        await scan.read(90.0)  # a plain read meanwhile takes nothing of the gathering's
    assert reads == 2
    assert got == [2] * 5  # the plain read went first, alone
    assert filters == [90.0, 30.0]  # the gathered read looks at markers from the oldest root
    await scan.read_gathered(0.0)
    assert reads == 3  # a later caller never gets the earlier walk


# --------------------------------------------------------------------------- the group rule
#
# When may a process group be signalled by its id (``killpg``)? ``_process`` says: only
# while its leader is unreaped. These tests show why, by asking the kernel for a given pid
# through ``ns_last_pid`` (root only): the id of a group whose leader was reaped and whose
# members are gone is free, and the next process to take it leads a stranger's group that a
# late ``killpg`` would hit; while the leader is unreaped (a zombie) — or, after it, while a
# member lives — nobody can take it. Only the first condition can be held on purpose
# (a member may die at any moment), which is why the rule is the unreaped leader.

NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")


def _ask_for_pid(pid: int) -> subprocess.Popen[bytes] | None:
    """Start a new-session ``sleep`` as ``pid`` if the kernel gives it; ``None`` if not.

    Other processes of the machine fork too, so one that takes the pid first is retried.
    """
    for _ in range(50):
        NS_LAST_PID.write_text(str(pid - 1))
        child = subprocess.Popen(["sleep", "1000"], start_new_session=True)
        if child.pid == pid:
            return child
        child.kill()
        child.wait()
        if child.pid > pid or child.pid < pid - 1000:  # pid was skipped: it is in use
            return None
    raise AssertionError(f"pid {pid} was never handed out, nor skipped")


needs_ns_last_pid = pytest.mark.skipif(
    not NS_LAST_PID.exists() or not os.access(NS_LAST_PID, os.W_OK),
    reason="choosing the next pid needs a writable /proc/sys/kernel/ns_last_pid (root)",
)


@needs_ns_last_pid
def test_10_3_a_reaped_leaders_group_id_can_name_a_strangers_group() -> None:
    leader = subprocess.Popen(["true"], start_new_session=True)
    leader.wait()  # reaped, and the group had no other member
    stranger = _ask_for_pid(leader.pid)
    assert stranger is not None, "the id of an empty group's reaped leader is free"
    try:
        assert os.getpgid(stranger.pid) == leader.pid  # the old group id: a stranger's group
        os.killpg(leader.pid, 0)  # a late killpg by the old id reaches the stranger
    finally:
        stranger.kill()
        stranger.wait()


@needs_ns_last_pid
def test_10_3_an_unreaped_leader_keeps_its_group_id_from_anyone_else() -> None:
    leader = subprocess.Popen(["true"], start_new_session=True)
    try:
        os.waitid(os.P_PID, leader.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
        assert _ask_for_pid(leader.pid) is None
    finally:
        leader.wait()


@needs_ns_last_pid
def test_10_3_a_live_member_keeps_a_reaped_leaders_group_id_too() -> None:
    # The half of the rule that cannot be relied on: true only while the member lives.
    leader = subprocess.Popen(
        ["bash", "-c", "sleep 1000 & echo $!"], start_new_session=True, stdout=subprocess.PIPE
    )
    assert leader.stdout is not None
    member = int(leader.stdout.readline())
    leader.wait()
    leader.stdout.close()
    try:
        assert os.getpgid(member) == leader.pid
        assert _ask_for_pid(leader.pid) is None
    finally:
        os.kill(member, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(member, 0)


async def test_10_3_wait_exited_leaves_the_leader_unreaped(tmp_path: Path) -> None:
    spawned = await spawn_process(
        ["bash", "-c", "sleep 1000 & exit 0"], cwd=tmp_path, env=dict(os.environ), tty=False
    )
    try:
        with trio.fail_after(10):
            await _process.wait_exited(spawned.process)
        # Exited, not reaped (a waitid that does not reap still finds it): the id is reserved.
        assert os.waitid(os.P_PID, spawned.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)  # noqa: ASYNC222
        assert table_entry(spawned.pid).zombie
        assert _process.signal_group(spawned.pgid, signal.SIGKILL)  # reaches the member
    finally:
        with trio.fail_after(10):
            await spawned.process.wait()
        await spawned.output.aclose()
        await spawned.stdin.aclose()
    await wait_until(lambda: not read_process_table().group(spawned.pgid), within=10)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd" if sys.platform.startswith("linux") else "/dev/fd"))


@pytest.mark.skipif(not _process._HAS_PIDFD, reason="the loop-thread start needs pidfds")
async def test_20_5_a_pipe_command_starts_on_the_loops_thread_and_is_reaped(
    tmp_path: Path,
) -> None:
    # Every worker thread is taken: a start that hopped to one would wait here for ever.
    limiter = trio.to_thread.current_default_thread_limiter()
    old_total = limiter.total_tokens
    limiter.total_tokens = 1
    await limiter.acquire()
    try:
        with trio.fail_after(10):
            spawned = await spawn_process(
                ["bash", "-c", 'read line; echo "got $line"; exit 3'],
                cwd=tmp_path,
                env=dict(os.environ),
                tty=False,
            )
            await spawned.stdin.send_all(b"hello\n")
            text = b""
            while b"\n" not in text:
                text += await spawned.output.receive_some(4096)
            status = await spawned.process.wait()
    finally:
        limiter.release()
        limiter.total_tokens = old_total
    assert text == b"got hello\n"
    assert status == 3
    assert await spawned.process.wait() == 3  # a second wait answers at once
    with pytest.raises(ChildProcessError):  # reaped: nothing is left to wait for
        os.waitpid(spawned.pid, os.WNOHANG)  # noqa: ASYNC222 - WNOHANG never blocks
    await spawned.output.aclose()
    await spawned.stdin.aclose()


async def test_20_5_a_signal_ends_a_pipe_command_with_minus_the_signal(tmp_path: Path) -> None:
    spawned = await spawn_process(["sleep", "1000"], cwd=tmp_path, env=dict(os.environ), tty=False)
    try:
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT  # neither blocks nor reaps
        assert os.waitid(os.P_PID, spawned.pid, flags) is None  # noqa: ASYNC222 - still running
        assert _process.signal_group(spawned.pgid, signal.SIGTERM)
        with trio.fail_after(10):
            assert await spawned.process.wait() == -signal.SIGTERM
    finally:
        await spawned.output.aclose()
        await spawned.stdin.aclose()


@pytest.mark.parametrize("start", ["pipes", "terminal", "three-pipes"])
async def test_20_5_a_command_that_cannot_start_raises_and_leaks_no_descriptor(
    tmp_path: Path, start: str
) -> None:
    """Neither the child's ends nor penguin's stay open: a command's, a terminal's, a server's."""

    async def spawn(argv: list[str], cwd: Path) -> None:
        if start == "three-pipes":
            await _process.spawn_piped(argv, cwd=cwd, env=dict(os.environ))
        else:
            await spawn_process(argv, cwd=cwd, env=dict(os.environ), tty=start == "terminal")

    await on_local_disk(tmp_path)  # its watch of the mount table stays open: the process's
    before = _open_fds()
    with pytest.raises(FileNotFoundError):
        await spawn(["true"], tmp_path / "missing")
    with pytest.raises(FileNotFoundError):
        await spawn(["no-such-program-penguin"], tmp_path)
    assert _open_fds() == before


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="the pidfd start")
@pytest.mark.parametrize(("script", "status"), [("exit 3", 3), ("kill -KILL $$", -9)])
async def test_10_3_a_piped_servers_status_is_read_without_reaping_it(
    tmp_path: Path, script: str, status: int
) -> None:
    """An MCP stdio server's status, read before it is waited for, leaves it a zombie."""
    started = await _process.spawn_piped(["bash", "-c", script], cwd=tmp_path, env=dict(os.environ))
    try:
        await _process.wait_exited(started.process)
        assert started.process.returncode == status
        assert started.process.returncode == status  # asked again: still there
        assert psutil.Process(started.process.pid).status() == psutil.STATUS_ZOMBIE
        assert await started.process.wait() == status  # reaped only here
        assert started.process.returncode == status
    finally:
        for stream in (started.stdin, started.stdout, started.stderr):
            await stream.aclose()
