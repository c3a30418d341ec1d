"""TraceRecorder: writes in submission order off the hot path, rotates, flushes, never raises."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from penguin import protocol as om
from penguin.engine import TraceRecorder
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
