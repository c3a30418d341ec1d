"""Issue 20.1a: marker sweeps through the shared table reads, filtered by start time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
import trio

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
