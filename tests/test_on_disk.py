"""DESIGN §2: small file work is done on the loop's thread where no disk can hang it.

A session's trace records, its lock's release and a batch's results line are a few
system calls each. On a local disk they take microseconds, and a worker thread would
cost far more (a hop, and a GIL hand-over per call): ``penguin._mounts.run_on_disk``
does them on the loop's thread. On any other file system (a file server may stop
answering) they go to a worker, as before. The file tools, and an Environment's first
look at its workspace, go further (``_mounts.run_file_work``): on the loop's thread
only when every mount of the machine is a local disk or the kernel's, and only while
the file is small and on a local disk. These tests read the kernel's real mount
table, write real files, and watch the loop's own thread for the blocking parts; a
table "as a machine whose every directory is on NFS would read it" stands for a
network file system.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import pytest
import trio

import penguin
from penguin import _mounts
from penguin import protocol as om
from penguin._mounts import (
    INLINE_BYTES,
    MountTable,
    on_local_disk,
    read_mount_table,
    run_file_work,
    run_on_disk,
    stays_local,
)
from penguin.agent import Agent
from penguin.batch import BatchResult, ResultsFile, _output
from penguin.environment import EnvironmentConfig, _environment
from penguin.environment.tools._files import write_atomically
from penguin.environment.tools.read_file import render_window, scan_lines
from penguin.llm import ScriptedLLM
from penguin.trace import SessionLock, TraceWriter, _writer


@pytest.fixture(autouse=True)
def table() -> Iterator[None]:
    """Each test starts without a table read, and leaves none behind."""
    _mounts._table = None
    yield
    _mounts._table = None


async def _as_if_on_nfs() -> None:
    """From now on every directory is on NFS (the kernel's table read first, and watched)."""
    assert await on_local_disk(Path("/"))
    _mounts._table = MountTable({"/": "nfs4"})


@contextmanager
def calls_on_this_thread(*codes: CodeType) -> Iterator[list[str]]:
    """The name of each of ``codes`` called on this thread while the block runs."""
    seen: list[str] = []
    me = threading.get_ident()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code in codes:
            assert threading.get_ident() == me
            seen.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(None)


def _text(line: str) -> str:
    payload = om.loads(line).payload
    assert isinstance(payload, om.TextPayload)
    return payload.text


_BURST = _writer.TraceWriter._append_burst_locked.__code__
_ONE = _writer.TraceWriter._append_locked.__code__


@pytest.mark.parametrize("on_nfs", [False, True], ids=["local", "nfs"])
async def test_design_2_trace_records_on_a_local_disk_are_written_on_the_loop_thread(
    tmp_path: Path, on_nfs: bool
) -> None:
    if on_nfs:
        await _as_if_on_nfs()
    writer = TraceWriter(tmp_path / "traces", "s-1")
    with calls_on_this_thread(_BURST, _ONE) as seen:
        assert await writer.record_many([om.user_text("one"), om.user_text("two")]) == 2
        assert await writer.append(om.user_text("three"))
    assert seen == ([] if on_nfs else ["_append_burst_locked", "_append_locked"])
    lines = writer.path.read_text().splitlines()
    assert [_text(line) for line in lines] == ["one", "two", "three"]


async def test_design_2_a_cancelled_record_on_the_loop_thread_still_lands_whole(
    tmp_path: Path,
) -> None:
    writer = TraceWriter(tmp_path / "traces", "s-1")
    await writer.append(om.user_text("first"))  # the table read, and the traces folder placed
    with trio.CancelScope() as scope, calls_on_this_thread(_ONE) as seen:
        scope.cancel()  # before the call: it does not start
        await writer.append(om.user_text("never"))
    assert scope.cancelled_caught
    assert seen == []
    with trio.CancelScope() as scope, calls_on_this_thread(_ONE) as seen:
        await writer.append(om.user_text("second"))  # lands: returns, as a worker's would
        scope.cancel()
        await trio.lowlevel.checkpoint()  # the cancel, at the next checkpoint
    assert seen == ["_append_locked"]
    texts = [_text(line) for line in writer.path.read_text().splitlines()]
    assert texts == ["first", "second"]


_RELEASE = SessionLock.release.__code__


@pytest.mark.parametrize("on_nfs", [False, True], ids=["local", "nfs"])
async def test_design_2_a_session_lock_is_let_go_on_the_loop_thread_on_a_local_disk(
    tmp_path: Path, on_nfs: bool
) -> None:
    agent = Agent.open(tmp_path / "root")
    if on_nfs:
        await _as_if_on_nfs()
    with calls_on_this_thread(_RELEASE) as seen:
        async with agent.session(tmp_path, llm=ScriptedLLM([])) as session:
            lock = session.trace_path.parent / f"{session.session_id}.lock"
            assert lock.exists()
    assert not lock.exists()  # let go, and removed
    assert seen == ([] if on_nfs else ["release"])


_WRITE_WHOLE = _output._write_whole.__code__


@pytest.mark.parametrize("on_nfs", [False, True], ids=["local", "nfs"])
async def test_design_2_a_results_line_on_a_local_disk_is_written_on_the_loop_thread(
    tmp_path: Path, on_nfs: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if on_nfs:
        await _as_if_on_nfs()
    monkeypatch.chdir(tmp_path)  # a relative path is placed by where it is
    with ResultsFile.open("results.jsonl") as results, calls_on_this_thread(_WRITE_WHOLE) as seen:
        assert await results.append(BatchResult(id="t1", status="completed"))
    assert seen == ([] if on_nfs else ["_write_whole"])
    assert '"id":"t1"' in (tmp_path / "results.jsonl").read_text().replace(" ", "")


async def test_design_2_a_folder_is_placed_by_where_its_links_lead_and_remembered(
    tmp_path: Path,
) -> None:
    (tmp_path / "to-proc").symlink_to("/proc")  # /proc stands for a file server here
    assert await on_local_disk(tmp_path / "to-proc")  # by its path alone: local
    assert not await stays_local(tmp_path / "to-proc")  # where it leads: not
    assert await stays_local(tmp_path)
    table = _mounts._table
    assert table is not None
    assert table._settled == {str(tmp_path / "to-proc"): False, str(tmp_path): True}
    with calls_on_this_thread(_mounts.on_local_disk.__code__) as seen:
        assert not await stays_local(tmp_path / "to-proc")  # asked again
        assert await stays_local(tmp_path)
    assert seen == []  # answered from what was kept
    here = threading.get_ident()
    assert await run_on_disk(tmp_path / "to-proc", threading.get_ident) != here  # a worker
    assert await run_on_disk(tmp_path, threading.get_ident) == here  # this thread


def _only_local_disks(*far: str) -> MountTable:
    """This machine's table without any mount that is not a local disk or the kernel's.

    With ``far``, an NFS mount at each of those places besides (where nothing is read).
    """
    real = read_mount_table()
    near = {
        place: kind
        for place, kind in real.types.items()
        if kind in _mounts.LOCAL_TYPES or kind in _mounts.KERNEL_TYPES
    }
    return MountTable({**near, **dict.fromkeys(far, "nfs4")}, real.devices)


async def _as_if(table: MountTable) -> None:
    """From now on the mount table is ``table`` (the kernel's read first, and watched)."""
    assert await on_local_disk(Path("/"))
    _mounts._table = table


async def _call(env: penguin.Environment, name: str, **args: Any) -> str:
    out = await env.call_tool(om.tool_call(name, json.dumps(args), "c1"))
    return out.payload.output


_LOOK = _environment._look_around.__code__
_SCAN = scan_lines.__code__
_COMMIT = write_atomically.__code__
_RENDER = render_window.__code__  # a read's last step: where it was done


@pytest.mark.parametrize("far", [False, True], ids=["every-mount-local", "an-nfs-mount-too"])
async def test_design_2_file_tools_run_on_the_loop_thread_when_no_mount_is_remote(
    tmp_path: Path, far: bool
) -> None:
    await _as_if(_only_local_disks(*(["/mnt/far"] if far else [])))
    config = EnvironmentConfig(workspace_dir=tmp_path)
    with calls_on_this_thread(_LOOK, _SCAN, _COMMIT) as seen:
        async with penguin.Environment.open(config) as env:
            made = await _call(env, "write_file", file_path="a.txt", content="one\n")
            edited = await _call(
                env, "edit_file", file_path="a.txt", old_string="one", new_string="two"
            )
            read = await _call(env, "read_file", file_path="a.txt")
    assert made.startswith('Created "a.txt" (1 line, 4 bytes).')
    assert edited.startswith('Replaced 1 occurrence in "a.txt".')
    assert read.endswith("two")
    assert (tmp_path / "a.txt").read_text() == "two\n"
    inline = ["_look_around", "write_atomically", "write_atomically", "scan_lines"]
    assert seen == ([] if far else inline)


async def test_design_2_a_file_tool_meeting_a_large_file_starts_over_in_a_worker(
    tmp_path: Path,
) -> None:
    await _as_if(_only_local_disks())
    large = tmp_path / "large.txt"
    large.write_text("needle\n" + "x" * INLINE_BYTES + "\n")
    config = EnvironmentConfig(workspace_dir=tmp_path)
    async with penguin.Environment.open(config) as env:
        with calls_on_this_thread(_SCAN, _COMMIT) as seen:
            edited = await _call(
                env, "edit_file", file_path="large.txt", old_string="needle", new_string="pin"
            )
            read = await _call(env, "read_file", file_path="large.txt", limit=1)
            written = await _call(
                env, "write_file", file_path="copy.txt", content=large.read_text()
            )
            small = await _call(env, "write_file", file_path="small.txt", content="s\n")
    assert seen == ["write_atomically"]  # the small one only: the others went to a worker
    assert edited.startswith('Replaced 1 occurrence in "large.txt".')  # once, not twice
    assert large.read_text().startswith("pin\nxxx")
    assert "pin" in read
    assert written.startswith('Created "copy.txt" (2 lines,')
    assert (tmp_path / "copy.txt").read_text() == large.read_text()
    assert small.startswith('Created "small.txt"')


async def test_design_2_a_small_file_whose_work_is_long_is_done_in_a_worker(
    tmp_path: Path,
) -> None:
    """Weighed by its work, not its bytes: many replacements, a diff's table, many rows."""
    await _as_if(_only_local_disks())
    (tmp_path / "many.txt").write_text("ab\n" * 300)  # 900 bytes, 300 replacements
    (tmp_path / "old.txt").write_text("".join(f"old {i}\n" for i in range(300)))
    new = "".join(f"new {i}\n" for i in range(300))  # a 300 x 300 table to diff
    (tmp_path / "rows.txt").write_text("rows\n" * 3000)  # ~2,000 rows to render
    (tmp_path / "few.txt").write_text("ab\n" * 3)
    config = EnvironmentConfig(workspace_dir=tmp_path)
    async with penguin.Environment.open(config) as env:
        with calls_on_this_thread(_RENDER, _COMMIT) as seen:
            many = await _call(
                env,
                "edit_file",
                file_path="many.txt",
                old_string="ab",
                new_string="cd",
                replace_all=True,
            )
            rewritten = await _call(env, "write_file", file_path="old.txt", content=new)
            rows = await _call(env, "read_file", file_path="rows.txt")
        assert seen == []  # each in a worker
        with calls_on_this_thread(_COMMIT) as seen:
            few = await _call(
                env,
                "edit_file",
                file_path="few.txt",
                old_string="ab",
                new_string="cd",
                replace_all=True,
            )
        assert seen == ["write_atomically"]  # three replacements: on this thread
    assert many.startswith('Replaced 300 occurrences in "many.txt".')  # once, not twice
    assert (tmp_path / "many.txt").read_text() == "cd\n" * 300
    assert rewritten.startswith('Overwrote "old.txt" (300 lines,')
    assert (tmp_path / "old.txt").read_text() == new
    assert "     1\trows" in rows
    assert few.startswith('Replaced 3 occurrences in "few.txt".')


_ONLINE = "/sys/devices/system/cpu/online"  # sysfs: it has a size, but is not a disk's file


def _cpus_online() -> str | None:
    try:
        with open(_ONLINE, encoding="ascii") as file:
            return file.read().strip()
    except OSError:
        return None


async def test_design_2_a_file_of_the_kernels_tables_is_read_in_a_worker(tmp_path: Path) -> None:
    online = _cpus_online()
    if online is None:
        pytest.skip("no sysfs here")
    await _as_if(_only_local_disks())
    (tmp_path / "here.txt").write_text("here\n")
    config = EnvironmentConfig(workspace_dir=tmp_path)
    async with penguin.Environment.open(config) as env:
        with calls_on_this_thread(_SCAN) as seen:
            far = await _call(env, "read_file", file_path=_ONLINE)
            near = await _call(env, "read_file", file_path="here.txt")
    assert seen == ["scan_lines"]  # the disk's file only
    assert far.strip().endswith(online)
    assert near.endswith("here")


async def test_design_2_a_file_tool_cancelled_before_it_starts_does_nothing(tmp_path: Path) -> None:
    await _as_if(_only_local_disks())
    started: list[int] = []

    def work(check: _mounts.FileCheck) -> int:
        started.append(threading.get_ident())
        check(10, None)
        return 7

    with trio.CancelScope() as scope:
        scope.cancel()
        await run_file_work(work)
    assert scope.cancelled_caught
    assert started == []
    assert await run_file_work(work) == 7
    assert started == [threading.get_ident()]  # on this thread: small, and a local disk


def test_design_2_a_table_of_local_disks_and_the_kernels_own_is_all_local() -> None:
    text = (
        "22 1 254:0 / / rw - ext4 /dev/vda rw\n"
        "23 22 0:21 / /proc rw - proc proc rw\n"
        "24 22 0:23 / /dev/shm rw - tmpfs shm rw\n"
    )
    table = MountTable.parse(text)
    assert table.all_local
    assert table.devices == {os.makedev(254, 0), os.makedev(0, 23)}  # not /proc's
    assert not MountTable.parse(text + "25 22 0:40 / /mnt rw - nfs4 far:/x rw\n").all_local
    assert not MountTable.parse(text + "25 22 0:41 / /run/x rw - fuse.sshfs x rw\n").all_local
    assert not MountTable.parse(text + "25 22 what is this\n").all_local  # unknown: not
    assert not MountTable({"/": "ext4", "/home": "autofs"}).all_local
