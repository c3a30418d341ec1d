"""DESIGN §2: penguin's own file bookkeeping is done on the loop's thread on a local disk.

A session's trace records, its lock's release and a batch's results line are a few
system calls each. On a local disk they take microseconds, and a worker thread would
cost far more (a hop, and a GIL hand-over per call): ``penguin._mounts.run_on_disk``
does them on the loop's thread. On any other file system (a file server may stop
answering) they go to a worker, as before. These tests read the kernel's real mount
table, write real files, and watch the loop's own thread for the blocking parts; a
table "as a machine whose every directory is on NFS would read it" stands for a
network file system.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import pytest
import trio

from penguin import _mounts
from penguin import protocol as om
from penguin._mounts import MountTable, on_local_disk, run_on_disk, stays_local
from penguin.agent import Agent
from penguin.batch import BatchResult, ResultsFile, _output
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
