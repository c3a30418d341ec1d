"""Issue 20.1a: marker sweeps through the shared table reads, filtered by start time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import attrs
import pytest
import trio

from penguin.environment.supervisor import _proctable
from penguin.environment.supervisor._process import sweep_marked
from penguin.environment.supervisor._proctable import (
    OWNER_VARIABLE,
    ProcessEntry,
    is_alive,
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
