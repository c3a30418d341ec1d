"""Issue 20.1a: marker sweeps through the shared table reads, filtered by start time."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence

import attrs
import pytest
import trio
import trio.testing

from penguin.environment.supervisor import _proctable
from penguin.environment.supervisor._process import sweep_marked
from penguin.environment.supervisor._proctable import (
    OWNER_VARIABLE,
    PidMark,
    ProcessEntry,
    ProcessTable,
    is_alive,
    pid_mark,
    read_process_table,
    start_of,
    started_from_now,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="procfs")


def _marked_sleeper(owner: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["sleep", "30"], env={**os.environ, OWNER_VARIABLE: owner}, start_new_session=True
    )


def _entry(pid: int) -> ProcessEntry:
    found = [e for e in read_process_table().entries if e.pid == pid]
    assert found, f"pid {pid} is not in the table"
    return found[0]


def test_20_1_a_a_process_started_later_is_never_below_started_from_now() -> None:
    since = started_from_now()
    child = subprocess.Popen(["sleep", "5"])
    try:
        assert since > 0
        assert start_of(child.pid) >= since
    finally:
        child.kill()
        child.wait()


async def test_20_1_a_a_sweep_kills_what_started_since_and_reads_no_older_environment() -> None:
    owner = f"sweep-test-{os.getpid()}/"
    older = _marked_sleeper(owner + "1")
    try:
        older_start = start_of(older.pid)
        # The boot clock moves on by a tick; nothing to wait on but the clock itself.
        while started_from_now() <= older_start:  # noqa: ASYNC110
            await trio.sleep(0.01)
        since = started_from_now()
        newer = _marked_sleeper(owner + "2")
        try:
            newer_entry = _entry(newer.pid)
            assert await sweep_marked(owner, prefix=True, newer_than=since) == 1
            assert newer.wait(timeout=10) == -signal.SIGKILL
            assert not is_alive(newer_entry)
            assert older.poll() is None  # its environment was not read: not found
            assert await sweep_marked(owner, prefix=True) == 1  # no filter: found
            assert older.wait(timeout=10) == -signal.SIGKILL
        finally:
            newer.kill()
            newer.wait()
    finally:
        older.kill()
        older.wait()


# ---------------------------------------------------------------- processes older than us

_READER = """
import json, subprocess, sys
from penguin.environment.supervisor._proctable import read_process_table
older = int(sys.argv[1])
newer = subprocess.Popen(["sleep", "30"])
seen = []
for _ in range(3):  # the first read, then reads that trust what it learnt
    pids = {e.pid for e in read_process_table().entries}
    seen.append([older in pids, newer.pid in pids])
newer.kill()
newer.wait()
print(json.dumps(seen))
"""


def test_20_1_a_a_read_leaves_out_processes_older_than_the_reader() -> None:
    older = subprocess.Popen(["sleep", "30"])
    try:
        # The reader must start a clock tick later (start times are in ticks).
        while started_from_now() <= start_of(older.pid):
            time.sleep(0.01)
        done = subprocess.run(
            [sys.executable, "-c", _READER, str(older.pid)],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
    finally:
        older.kill()
        older.wait()
    assert done.stdout.strip() == "[[false, true], [false, true], [false, true]]"


def test_20_1_a_a_pid_the_kernel_may_have_given_again_is_read_again() -> None:
    newer = subprocess.Popen(["sleep", "30"])
    try:
        read_process_table()  # the cursor and fork count of a first read
        state = _proctable._OLDER.current(os.getpid())
        # Pretend the sleeper's pid belonged to an older process at the last read.
        fake = attrs.evolve(state, pids=frozenset({newer.pid}))
        # The kernel gave pids above the cursor since: the sleeper's pid was among them.
        _proctable._OLDER.keep(fake, [newer.pid], _window(after=newer.pid - 1))
        assert newer.pid in {e.pid for e in read_process_table().entries}
        # Outside the window the pid is trusted: the read does not open its stat.
        fake = attrs.evolve(_proctable._OLDER.current(os.getpid()), pids=frozenset({newer.pid}))
        cursor = _proctable._last_pid()
        assert cursor is not None
        _proctable._OLDER.keep(fake, [newer.pid], _window(after=cursor))
        assert newer.pid not in {e.pid for e in read_process_table().entries}
        # Too many forks since the last read: nothing is trusted.
        _proctable._OLDER.keep(fake, [newer.pid], _window(after=cursor, forks=-(10**9)))
        assert newer.pid in {e.pid for e in read_process_table().entries}
    finally:
        newer.kill()
        newer.wait()
        _proctable._OLDER.forget()


def _window(*, after: int, forks: int = 0) -> _proctable._Window:
    count = _proctable._forks()
    return _proctable._Window(
        after, after, None if count is None else count + forks, everything=False
    )


@pytest.mark.parametrize(
    ("after", "cursor", "everything", "covered", "not_covered"),
    [
        (100, 200, False, [101, 150, 200], [100, 99, 201, 5000]),
        (4_000_000, 500, False, [4_000_001, 4_194_303, 300, 500], [501, 3_999_999, 4_000_000]),
        (100, 100, False, [], [99, 100, 101]),
        (100, 200, True, [1, 150, 10**6], []),
        (None, 200, False, [1, 150, 10**6], []),
    ],
)
def test_20_1_a_the_pids_given_between_two_reads(
    after: int | None, cursor: int, everything: bool, covered: list[int], not_covered: list[int]
) -> None:
    window = _proctable._Window(after, cursor, 0, everything)
    assert [window.covers(pid) for pid in covered] == [True] * len(covered)
    assert [window.covers(pid) for pid in not_covered] == [False] * len(not_covered)


# ---------------------------------------------------------------- what started since a mark


def test_20_1_a_a_read_since_a_mark_is_of_the_pids_given_after_it() -> None:
    owner = f"mark-test-{os.getpid()}/1"
    older = subprocess.Popen(["sleep", "30"])
    try:
        mark = pid_mark()
        assert mark is not None
        # Marked, in a session of its own: found by the marker alone. (Popen returns
        # once it has exec'd: a process between two execs shows an empty environment.)
        daemon = _marked_sleeper(owner)
        newer = subprocess.Popen(["sleep", "30"])
        try:
            since = read_process_table(since=mark)
            pids = {e.pid for e in since.entries}
            assert newer.pid in pids
            assert older.pid not in pids  # given before the mark: not even its stat read
            assert [e.pid for e in since.marked(owner)] == [daemon.pid]
            assert older.pid in {e.pid for e in read_process_table().entries}
            # A mark a whole turn of forks old proves nothing: every process is read.
            stale = PidMark(mark.cursor, mark.forks - 10**6)
            assert older.pid in {e.pid for e in read_process_table(since=stale).entries}
        finally:
            for process in (newer, daemon):
                process.kill()
                process.wait()
    finally:
        older.kill()
        older.wait()


def test_20_1_a_a_mark_takes_a_fork_count_never_above_the_kernels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # /proc/stat is read at most every _FORKS_FRESH seconds for marks: a count read
    # earlier is lower, which only brings a read of every process sooner.
    monkeypatch.setattr(_proctable, "_recent_forks", (time.monotonic(), 5))
    mark = pid_mark()
    assert mark is not None
    assert mark.forks == 5  # the recent count served, no read
    stale = time.monotonic() - 2 * _proctable._FORKS_FRESH
    monkeypatch.setattr(_proctable, "_recent_forks", (stale, 5))
    mark = pid_mark()
    now = _proctable._forks()
    assert mark is not None
    assert now is not None
    assert 5 < mark.forks <= now  # read again: the kernel's count, not above it
    recent = _proctable._recent_forks
    assert recent is not None
    assert recent[1] == now  # every read refreshes what marks are served


async def test_20_1_a_a_shared_read_is_of_every_pid_once_one_caller_asks_for_all(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    marks: list[PidMark | Sequence[PidMark] | None] = []

    def recorded(
        newer_than: float = 0.0, since: PidMark | Sequence[PidMark] | None = None
    ) -> ProcessTable:
        marks.append(since)
        return ProcessTable(())

    monkeypatch.setattr(_proctable, "read_process_table", recorded)
    scan = _proctable._SharedScan()
    first, second = PidMark(500, 1_000), PidMark(520, 1_004)

    async def gathered(since: PidMark | None) -> None:
        await scan.read_gathered(0.05, 0.0, since)

    async with trio.open_nursery() as nursery:
        for mark in (second, first):
            nursery.start_soon(gathered, mark)
    async with trio.open_nursery() as nursery:
        for asked in (first, None, second):
            nursery.start_soon(gathered, asked)
    await scan.read(0.0, second)
    # Every caller's mark goes to the read; a caller with none needs every pid.
    assert marks == [(first, second), None, (second,)]


async def test_20_1_a_a_callers_behind_a_failed_read_keep_what_they_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    filters: list[float] = []

    def failing_once(
        newer_than: float = 0.0, since: PidMark | Sequence[PidMark] | None = None
    ) -> ProcessTable:
        filters.append(newer_than)
        if len(filters) == 1:
            raise OSError("the first read fails")
        return ProcessTable(())

    monkeypatch.setattr(_proctable, "read_process_table", failing_once)
    scan = _proctable._SharedScan()
    failed: list[float] = []

    async def read(newer_than: float) -> None:
        try:
            await scan.read(newer_than)
        except OSError:
            failed.append(newer_than)

    async with trio.open_nursery() as nursery:
        # Both ask before the first read begins, and share it; it fails for its maker.
        nursery.start_soon(read, 1.0)
        nursery.start_soon(read, 5.0)
    assert len(failed) == 1
    # The other caller's own read still reads markers from both filters, not from none.
    assert filters == [1.0, 1.0]


def test_20_a_process_caught_in_exec_or_exit_is_read_with_its_marker() -> None:
    """A live process of ours never reads as unmarked (the chaos matrix's rare survivor).

    The kernel shows no environment while ``execve`` sets up the new program and after
    an exit released the memory, before the zombie: a read in either moment saw no
    marker, and a session's end took the process for a stranger's. Here a marked shell
    starts short commands one after another while the table is read over and over.
    """
    owner = "chaos-exec/one"
    mark = pid_mark()
    shell = subprocess.Popen(
        ["bash", "-c", "for i in $(seq 400); do /bin/true; done"],
        env={**os.environ, OWNER_VARIABLE: owner},
    )
    unmarked: list[ProcessEntry] = []
    reads = 0
    try:
        while shell.poll() is None:
            for entry in read_process_table(since=mark).entries:
                if entry.ppid == shell.pid and not entry.zombie:
                    reads += 1
                    if entry.owner != owner:
                        unmarked.append(entry)
    finally:
        shell.kill()
        shell.wait()
    assert reads > 100
    assert unmarked == [], f"{len(unmarked)} of {reads} reads of a live child saw no marker"


def test_20_a_process_without_an_environment_is_waited_for_once_then_known() -> None:
    owner_less = subprocess.Popen(["sleep", "30"], env={}, start_new_session=True)
    try:
        entry = _entry(owner_less.pid)
        identity = (owner_less.pid, int(entry.started))
        for _ in range(100):  # each read waits out one such process of the machine's
            if identity in _proctable._envless:
                break
            entry = _entry(owner_less.pid)
        again = _entry(owner_less.pid)
    finally:
        owner_less.kill()
        owner_less.wait()
    assert entry.owner is None
    assert not entry.zombie
    assert identity in _proctable._envless
    assert again.owner is None
    assert not again.zombie


_FLICKER = r"""
import ctypes, sys, time

# The kernel's own bounds of this process's environment, from /proc/self/stat; a
# PR_SET_MM_MAP with an empty range makes /proc/<pid>/environ read empty, as it does
# while execve sets up a new program, and the true range makes it read whole again.
class Map(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "start_code end_code start_data end_data start_brk brk start_stack "
        "arg_start arg_end env_start env_end").split()]
    _fields_ += [("auxv", ctypes.c_void_p), ("auxv_size", ctypes.c_uint32),
                 ("exe_fd", ctypes.c_uint32)]

libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                       ctypes.c_ulong]
libc.sbrk.restype = ctypes.c_void_p
libc.sbrk.argtypes = [ctypes.c_long]
with open("/proc/self/stat", "rb") as stat:
    data = stat.read()
field = [b"", b"", b""] + data[data.rfind(b")") + 2 :].split()  # field[n]: man 5 proc's n
whole = Map(*(int(field[n]) for n in (26, 27, 45, 46, 47)), 0, int(field[28]),
            *(int(field[n]) for n in (48, 49, 50, 51)), None, 0, 0xFFFFFFFF)
# argv: what to empty ("env", or "both": the command line too, as between two
# programs), and for how long, then how long to show it whole, in seconds. "exec" is
# execve slowed down: both empty, then the command line alone, then whole (three spans).
what, *spans = sys.argv[1:] or ["env", "0.0015", "0.001"]
empty = Map.from_buffer_copy(whole)
empty.env_start = whole.env_end
command_line_only = Map.from_buffer_copy(empty)
if what in ("both", "exec"):
    empty.arg_start = whole.arg_end
if what == "exec":
    phases = [(empty, spans[0]), (command_line_only, spans[1]), (whole, spans[2])]
else:
    phases = [(empty, spans[0]), (whole, spans[1])]

def show(bounds):
    bounds.brk = libc.sbrk(0)
    if libc.prctl(35, 14, ctypes.addressof(bounds), ctypes.sizeof(bounds), 0) != 0:
        print("unsupported", ctypes.get_errno(), flush=True)
        sys.exit(0)

show(empty)
show(whole)
print("flickering", flush=True)
while True:  # by default empty 1.5 ms of every 2.5 ms, as a shell starting commands
    for bounds, span in phases:
        show(bounds)
        time.sleep(float(span))
"""


@contextlib.contextmanager
def _flickering(owner: str, *flicker: str) -> Iterator[subprocess.Popen[bytes]]:
    """A process marked ``owner`` running ``_FLICKER`` (with ``flicker``), once it flickers.

    Skips the test where the kernel does not let it set its bounds; killed at the end.
    """
    marked = subprocess.Popen(
        [sys.executable, "-c", _FLICKER, *flicker],
        env={**os.environ, OWNER_VARIABLE: owner},
        stdout=subprocess.PIPE,
    )
    try:
        assert marked.stdout is not None
        line = marked.stdout.readline().decode()
        if line.startswith("unsupported"):
            pytest.skip(f"this kernel has no PR_SET_MM_MAP for us ({line.strip()})")
        assert line == "flickering\n"
        yield marked
    finally:
        marked.kill()
        marked.wait()
        if marked.stdout is not None:
            marked.stdout.close()


def test_20_a_process_without_an_environment_does_not_use_up_the_wait_of_one_in_exec() -> None:
    """A stranger with no environment and a marked process caught in ``exec``, one read.

    The read waits out the stranger in full (50 ms) before it knows it has none. When
    that wait was one budget for the whole read, a marked process read after it got no
    wait at all: caught in ``exec`` it read as unmarked, and a session's end would
    have left it running. Here the marked process's environment reads empty three
    fifths of the time (its bounds set empty and back, as ``execve`` does), and each
    read sees a new stranger first: every read must still find the marker.
    """
    owner = "chaos-exec/two"
    seen: list[str | None] = []
    while len(seen) < 12:
        mark = pid_mark()
        stranger = subprocess.Popen(["sleep", "30"], env={}, start_new_session=True)
        try:
            with _flickering(owner) as marked:
                if marked.pid < stranger.pid:
                    continue  # the pids wrapped around between them: the stranger is read first
                entries = read_process_table(since=mark).entries
        finally:
            stranger.kill()
            stranger.wait()
        assert [e.pid for e in entries if e.pid in (stranger.pid, marked.pid)] == [
            stranger.pid,
            marked.pid,
        ]
        seen.append(next(e.owner for e in entries if e.pid == marked.pid))
    assert seen == [owner] * len(seen)


def test_20_a_a_process_between_programs_is_waited_for_past_the_short_wait() -> None:
    """A marked process whose command line and environment both read empty for 80 ms.

    That is a process between two programs, as in ``execve`` before the new program's
    stack is set up, or on a machine whose busy cores do not run it for that long. The
    short wait (50 ms, enough for a process with a command line and no environment to
    be taken as having none) gave up on it, and the read saw no marker: a session's
    end would have left it running (seen twice with all cores busy). It is waited for
    until it shows its environment again, within BETWEEN_PROGRAMS_WAIT.
    """
    owner = "chaos-exec/three"
    mark = pid_mark()
    seen: list[str | None] = []
    with _flickering(owner, "both", "0.08", "0.02") as marked:
        assert _proctable.EMPTY_ENVIRON_WAIT < 0.08  # its empty spell outlasts the short wait
        for _ in range(12):
            time.sleep(0.037)  # not a whole flicker: the reads fall at different points of it
            entries = read_process_table(since=mark).entries
            seen.append(next(e.owner for e in entries if e.pid == marked.pid))
    assert seen == [owner] * len(seen)


def test_20_a_a_process_seen_between_programs_is_waited_for_past_its_command_line() -> None:
    """``execve`` slowed down by a busy machine: both empty 60 ms, the command line alone 40.

    The kernel sets up a new program's command line, then its environment. A read that
    sees the process between programs, then with its command line back but no
    environment yet, must keep waiting for it: judged on its last look alone, it was
    given the short wait's verdict (no environment, so unmarked) at 50 ms. A process
    seen with its command line only from the start is still judged after 50 ms: here
    its environment comes back within 40 ms. Each look is also fresh when the short
    wait ends, however long the reading thread was kept from running.
    """
    owner = "chaos-exec/four"
    mark = pid_mark()
    seen: list[str | None] = []
    with _flickering(owner, "exec", "0.06", "0.04", "0.01") as marked:
        for _ in range(12):
            time.sleep(0.031)  # not a whole cycle: the reads fall at different points of it
            entries = read_process_table(since=mark).entries
            seen.append(next(e.owner for e in entries if e.pid == marked.pid))
    assert seen == [owner] * len(seen)


async def test_20_1_a_a_shared_read_covers_the_pids_since_each_mark_though_they_share_a_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two sessions end together; the first one's command left a process behind.

    Marks taken close together share one fork count (it is read at most every
    _FORKS_FRESH seconds), so the count cannot say which mark came first. The shared
    read must still cover the pids given since the first: the chaos matrix's survivors
    (orphaned_job and pipe_holder, one run in two with two CPU burners) were left
    there, when the later mark asked first and its window was the read's.
    """
    monkeypatch.setattr(_proctable, "_FORKS_FRESH", 60.0)  # both marks take one count
    owner = f"tie-test-{os.getpid()}/1"
    first = pid_mark()
    left_behind = _marked_sleeper(owner)  # started by the first session's command
    try:
        second = pid_mark()  # the second session's spawn
        assert first is not None
        assert second is not None
        assert first.forks == second.forks
        scan = _proctable._SharedScan()
        found: list[list[int]] = []

        async def gathered(mark: PidMark) -> None:
            table = await scan.read_gathered(0.05, 0.0, mark)
            found.append([entry.pid for entry in table.marked(owner)])

        async with trio.open_nursery() as nursery:
            nursery.start_soon(gathered, second)  # the later mark asks first
            await trio.testing.wait_all_tasks_blocked()  # it waits for company
            nursery.start_soon(gathered, first)
        assert found == [[left_behind.pid], [left_behind.pid]]
    finally:
        left_behind.kill()
        left_behind.wait()


@pytest.mark.parametrize(
    ("one", "other", "cursor", "farther"),
    [
        (100, 200, 300, 100),
        (200, 100, 300, 100),
        (-100, 400, 500, -100),  # pid_max - 100: given before the pids wrapped
        (400, -100, 500, -100),
        (250, 250, 300, 250),
    ],
)
def test_20_1_a_the_first_of_several_marks_is_the_one_farthest_behind_the_cursor(
    one: int, other: int, cursor: int, farther: int
) -> None:
    pid_max = _proctable._pid_max()
    one, other, farther = (pid_max + a if a < 0 else a for a in (one, other, farther))
    behind = {after: _proctable._behind(after, cursor) for after in (one, other)}
    assert max(behind, key=behind.__getitem__) == farther
