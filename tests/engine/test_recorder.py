"""TraceRecorder: writes in submission order off the hot path, rotates, flushes, never raises."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from penguin import protocol as om
from penguin.engine import TraceRecorder
from penguin.engine._recorder import _IDLE_BOUND
from penguin.trace import TraceWriter, read_trace

from .support import SESSION_ID, kind


async def test_records_land_in_order_and_rotations_split_the_files(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, SESSION_ID)
    first = writer.path
    async with TraceRecorder.open(writer) as recorder:
        recorder.record(om.user_text("one"))
        recorder.record(om.partial_text("delta", "skipped"))
        recorder.record(om.with_origin(om.user_text("child"), "child-session"))
        recorder.record(om.request_begin())
        recorder.rotate()
        recorder.record(om.user_text("two"))
        await recorder.flush()
        assert writer.path.name.endswith("_002.jsonl")
    assert [kind(m) for m in read_trace(first)] == ["text", "request_begin"]
    assert [kind(m) for m in read_trace(writer.path)] == ["text"]


async def test_leaving_the_block_writes_everything_queued(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, SESSION_ID)
    async with TraceRecorder.open(writer) as recorder:
        for n in range(200):
            recorder.record(om.user_text(str(n)))
    assert len(read_trace(writer.path)) == 200


async def test_leaving_by_cancellation_still_writes_everything_queued(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, SESSION_ID)
    with trio.CancelScope() as scope:
        async with TraceRecorder.open(writer) as recorder:
            for n in range(50):
                recorder.record(om.user_text(str(n)))
            scope.cancel()
            await trio.sleep_forever()
    assert len(read_trace(writer.path)) == 50


async def test_a_closed_recorder_logs_instead_of_raising(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = TraceWriter(tmp_path, SESSION_ID)
    async with TraceRecorder.open(writer) as recorder:
        pass
    recorder.record(om.user_text("late"))
    recorder.rotate()
    await recorder.flush()
    assert caplog.messages == [
        "[trace] write failed: the trace recorder is closed",
        "[trace] rotate failed: the trace recorder is closed",
    ]
    assert not writer.path.exists()


class Spinner:
    """Keeps the Trio loop busy (always runnable) until told to stop or a real-time bound."""

    def __init__(self) -> None:
        self.stop = False
        self.spins = 0
        self.gave_up = False

    async def spin(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        give_up_at = time.monotonic() + 20  # real time: under MockClock trio time stands still
        while not self.stop:
            self.spins += 1
            if time.monotonic() > give_up_at:
                self.gave_up = True
                return
            await trio.lowlevel.checkpoint()

    async def until(self, condition: Callable[[], bool]) -> None:
        """Checkpoint (the loop stays busy) until ``condition`` holds; fail after 20 s."""
        give_up_at = time.monotonic() + 20
        while not condition():
            assert time.monotonic() < give_up_at, "the condition never held"
            await trio.lowlevel.checkpoint()


def _lines(path: Path) -> int:
    return len(read_trace(path)) if path.exists() else 0


async def test_7_4_records_land_without_a_flush_once_the_loop_is_idle(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, SESSION_ID)
    async with TraceRecorder.open(writer) as recorder:
        for n in range(100):  # more than one burst
            recorder.record(om.user_text(str(n)))
        with trio.fail_after(20):
            # The file is the state; no event says it changed. Sleeping idles the loop.
            while _lines(writer.path) < 100:  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert [kind(m) for m in read_trace(writer.path)] == ["text"] * 100


async def test_7_4_a_busy_loop_delays_records_at_most_the_idle_bound(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    writer = TraceWriter(tmp_path, SESSION_ID)
    spinner = Spinner()
    async with TraceRecorder.open(writer) as recorder, trio.open_nursery() as nursery:
        await nursery.start(spinner.spin)
        recorder.record(om.user_text("queued while busy"))
        start = spinner.spins
        await spinner.until(lambda: spinner.spins > start + 2000)
        assert not writer.path.exists()  # never idle, bound not reached: not written yet

        mock_clock.jump(_IDLE_BOUND)  # the record has now waited the whole bound
        await spinner.until(lambda: _lines(writer.path) == 1)
        assert not spinner.gave_up  # written while the loop was still busy
        spinner.stop = True


async def test_7_4_flush_does_not_wait_for_an_idle_loop(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    writer = TraceWriter(tmp_path, SESSION_ID)
    spinner = Spinner()
    async with TraceRecorder.open(writer) as recorder, trio.open_nursery() as nursery:
        await nursery.start(spinner.spin)
        recorder.record(om.user_text("one"))
        recorder.rotate()
        recorder.record(om.user_text("two"))
        await recorder.flush()
        assert not spinner.gave_up  # the loop stayed busy all along
        assert _lines(writer.path) == 1
        assert writer.path.name.endswith("_002.jsonl")
        spinner.stop = True


_OPENED_WHILE_CANCELLED = """
import sys
from pathlib import Path

import trio

from penguin import protocol as om
from penguin.engine import TraceRecorder
from penguin.trace import TraceWriter, read_trace


async def main() -> None:
    writer = TraceWriter(Path(sys.argv[1]), "s-1")
    with trio.CancelScope() as scope:
        scope.cancel()  # the owner is being cancelled as the recorder opens
        async with TraceRecorder.open(writer) as recorder:
            recorder.record(om.user_text("kept"))
            await trio.sleep_forever()
    print(len(read_trace(writer.path)))


trio.run(main)
"""


async def test_a_recorder_opened_by_a_cancelled_owner_closes_and_writes(tmp_path: Path) -> None:
    # Its drain is shielded: started through nursery.start by an owner under
    # cancellation it stayed under start(), which waited for it forever (a batch
    # stopping while a session opened hung so). A process of its own, so that a
    # regression fails by its timeout instead of hanging the suite.
    assert (await _run_script(_OPENED_WHILE_CANCELLED, tmp_path)).split() == ["1"]


async def _run_script(script: str, directory: Path) -> str:
    """Run ``script`` in a fresh interpreter with ``directory`` as its argument; its stdout."""
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-c", script, str(directory)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


_RECORD_AND_LIST_MODULES = """
import json, sys
from pathlib import Path

import trio

from penguin import protocol as om
from penguin.engine import TraceRecorder
from penguin.trace import TraceWriter, read_trace


async def main() -> None:
    writer = TraceWriter(Path(sys.argv[1]), "s-1")
    async with TraceRecorder.open(writer) as recorder:
        recorder.record(om.user_text("one"))
        with trio.fail_after(20):
            while not writer.path.exists():  # written once the loop idles: no flush
                await trio.sleep(0.01)
    print(json.dumps({"lines": len(read_trace(writer.path)), "modules": sorted(sys.modules)}))


trio.run(main)
"""


async def test_7_4_waiting_for_an_idle_loop_loads_neither_trio_testing_nor_pytest(
    tmp_path: Path,
) -> None:
    # trio.testing imports pytest (145 ms of CPU) wherever it is installed, as it is here.
    report = json.loads(await _run_script(_RECORD_AND_LIST_MODULES, tmp_path))
    assert report["lines"] == 1
    modules = set(report["modules"])
    assert "trio.testing" not in modules
    assert "pytest" not in modules
