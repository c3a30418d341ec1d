"""The writer in real child processes: SIGKILL mid-run, a file size limit, write(2) counts."""

from __future__ import annotations

import errno
import logging
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from penguin import protocol as om
from penguin.trace import TraceWriter, read_trace

from .support import record_bytes, texts

# The child appends numbered records forever and reports each on stdout once it landed. Given
# a file size limit, it restores SIGXFSZ's default action, so the kernel kills it in the middle
# of the record that crosses the limit: a crash that tears the tail deterministically.
LOOPING_CHILD = """
import resource
import signal
import sys
import trio
from penguin import protocol as om
from penguin.trace import TraceWriter

async def main() -> None:
    traces_dir, session_id, date_dir, size = sys.argv[1:5]
    if len(sys.argv) > 5:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[5]), hard))
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    writer = TraceWriter(traces_dir, session_id, date_dir=date_dir)
    number = 0
    while True:
        number += 1
        await writer.append(om.user_text(f"{number} " + "x" * int(size)))
        print(number, flush=True)

trio.run(main)
"""

# The child hits RLIMIT_FSIZE in the middle of its second record (Python ignores SIGXFSZ, so
# the kernel cuts the write short and the next write fails with EFBIG), then lifts the limit.
# Issue 21.4: the cut record is truncated away (whole or nothing) and the failure is kept.
FILE_SIZE_LIMIT_CHILD = """
import os
import resource
import sys
import trio
from penguin import protocol as om
from penguin.trace import TraceWriter

async def main() -> None:
    traces_dir, session_id, date_dir, room = sys.argv[1:5]
    writer = TraceWriter(traces_dir, session_id, date_dir=date_dir)
    await writer.append(om.user_text("first"))
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(writer.path) + int(room), hard))
    try:
        await writer.append(om.user_text("second " + "y" * 10_000))
    except OSError as exc:
        print("failed", exc.errno, flush=True)
    print("size", os.path.getsize(writer.path), flush=True)
    print(writer.failure, flush=True)
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    await writer.append(om.user_text("third"))
    print("done", flush=True)

trio.run(main)
"""

# Three records, the last one far above Node's 512 KiB appendFile chunk, under strace.
SIZES_CHILD = """
import sys
import trio
from penguin import protocol as om
from penguin.trace import TraceWriter

async def main() -> None:
    writer = TraceWriter(sys.argv[1], sys.argv[2], date_dir=sys.argv[3])
    for size in (10, 100_000, 4_000_000):
        await writer.append(om.user_text("z" * size))
    print(writer.path, flush=True)

trio.run(main)
"""


# The same three records as one burst (the trace recorder's path), then one more burst.
BURST_SIZES_CHILD = """
import sys
import trio
from penguin import protocol as om
from penguin.trace import TraceWriter

async def main() -> None:
    writer = TraceWriter(sys.argv[1], sys.argv[2], date_dir=sys.argv[3])
    await writer.record_many([om.user_text("z" * size) for size in (10, 100_000, 4_000_000)])
    await writer.record_many([om.user_text("last")])
    print(writer.path, flush=True)

trio.run(main)
"""

# A burst whose second record crosses RLIMIT_FSIZE: it is cut short, then fails with EFBIG and
# is truncated away; the third does not fit either; the limit lifted, the next burst lands.
BURST_FILE_SIZE_LIMIT_CHILD = """
import os
import resource
import sys
import trio
from penguin import protocol as om
from penguin.trace import TraceWriter

async def main() -> None:
    traces_dir, session_id, date_dir, room = sys.argv[1:5]
    writer = TraceWriter(traces_dir, session_id, date_dir=date_dir)
    await writer.record_many([om.user_text("first")])
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(writer.path) + int(room), hard))
    big, small = om.user_text("second " + "y" * 10_000), om.user_text("third")
    print("landed", await writer.record_many([big, small]), flush=True)
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    print("landed", await writer.record_many([om.user_text("fourth")]), flush=True)

trio.run(main)
"""


def script(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "child.py"
    path.write_text(source)
    return path


def numbers(messages: list[om.OmniMessage[om.Payload]]) -> list[int]:
    return [int(text.split(" ", 1)[0]) for text in texts(messages)]


async def resume_and_check(traces: Path, reported: int, caplog: pytest.LogCaptureFixture) -> bool:
    """Read the crashed trace, continue it with a new writer, read it all; return if torn."""
    path = traces / "d" / "s_001.jsonl"
    before = path.read_bytes()
    torn = not before.endswith(b"\n")
    with caplog.at_level(logging.WARNING, logger="penguin"):
        survived = numbers(read_trace(path))
    assert caplog.messages == []  # a torn tail is silent
    assert survived == list(range(1, len(survived) + 1))
    assert len(survived) >= reported  # every reported record is complete on disk

    resumed = TraceWriter(traces, "s", date_dir="d")
    for i in range(3):
        await resumed.append(om.user_text(f"{len(survived) + 1 + i} resumed"))

    after = path.read_bytes()
    assert after.startswith(before + (b"\n" if torn else b""))
    assert after[len(before) + torn : len(before) + torn + 1] == b"{"
    with caplog.at_level(logging.WARNING, logger="penguin"):
        everything = read_trace(path)
    assert numbers(everything) == list(range(1, len(survived) + 4))
    torn_line = before.count(b"\n") + 1
    assert caplog.messages == (
        [f"[trace] skipped 1 malformed line(s) [{torn_line}] in {path}"] if torn else []
    )
    return torn


@pytest.mark.parametrize("size", [100, 64 * 1024, 1024 * 1024])
async def test_7_4_sigkill_mid_run_then_resume(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, size: int
) -> None:
    traces = tmp_path / "traces"
    child = script(tmp_path, LOOPING_CHILD)
    process = await trio.lowlevel.open_process(
        [sys.executable, str(child), str(traces), "s", "d", str(size)],
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    seen = b""
    try:
        with trio.fail_after(60):
            while seen.count(b"\n") < 20:  # wait for real progress, then kill mid-loop
                chunk = await process.stdout.receive_some()
                assert chunk, "the child exited before reporting progress"
                seen += chunk
            process.send_signal(signal.SIGKILL)
            assert await process.wait() == -signal.SIGKILL
    finally:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()
            await process.stdout.aclose()
    # The tail is torn only if the kill landed inside a write(2): both outcomes must resume.
    await resume_and_check(traces, int(seen.split(b"\n")[-2]), caplog)


async def test_7_4_killed_mid_record_then_resume(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    traces = tmp_path / "traces"
    child = script(tmp_path, LOOPING_CHILD)
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, str(child), str(traces), "s", "d", "1000", str(50_000)],
            capture_stdout=True,
            check=False,
            cwd=tmp_path,
        )
    assert done.returncode == -signal.SIGXFSZ
    assert (traces / "d" / "s_001.jsonl").stat().st_size == 50_000  # cut inside a record
    reported = int(done.stdout.split(b"\n")[-2])
    assert await resume_and_check(traces, reported, caplog) is True


async def test_21_4_a_record_cut_short_is_truncated_away_and_the_failure_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    traces = tmp_path / "traces"
    child = script(tmp_path, FILE_SIZE_LIMIT_CHILD)
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, str(child), str(traces), "s", "d", "100"],
            capture_stdout=True,
        )
    path = traces / "d" / "s_001.jsonl"
    first_size = len(record_bytes(om.user_text("first")))
    assert done.stdout.decode().split("\n") == [
        f"failed {errno.EFBIG}",
        f"size {first_size}",  # the 100 bytes that got through are gone again
        "trace write failed: File too large",
        "done",
        "",
    ]
    first, third, end = path.read_bytes().split(b"\n")
    assert om.loads(first).payload == om.user_text("first").payload
    assert om.loads(third).payload == om.user_text("third").payload
    assert end == b""
    with caplog.at_level(logging.WARNING, logger="penguin"):
        assert texts(read_trace(path)) == ["first", "third"]
    assert caplog.messages == []


async def test_21_4_a_record_cut_short_inside_a_burst_is_truncated_away(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    traces = tmp_path / "traces"
    child = script(tmp_path, BURST_FILE_SIZE_LIMIT_CHILD)
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, str(child), str(traces), "s", "d", "100"],
            capture_stdout=True,
            capture_stderr=True,
        )
    assert done.stdout.decode().split("\n") == ["landed 0", "landed 1", ""]
    failures = [line for line in done.stderr.decode().splitlines() if "[trace]" in line]
    assert len(failures) == 2, done.stderr  # one line per failed record
    assert all(f"[trace] write failed: [Errno {errno.EFBIG}]" in line for line in failures)

    path = traces / "d" / "s_001.jsonl"
    first, fourth, end = path.read_bytes().split(b"\n")  # nothing of the second is left
    assert om.loads(first).payload == om.user_text("first").payload
    assert om.loads(fourth).payload == om.user_text("fourth").payload
    assert end == b""
    with caplog.at_level(logging.WARNING, logger="penguin"):
        assert texts(read_trace(path)) == ["first", "fourth"]
    assert caplog.messages == []


def _strace_works() -> bool:
    strace = shutil.which("strace")
    if strace is None:
        return False
    probe = subprocess.run([strace, "-o", "/dev/null", "true"], capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(not _strace_works(), reason="needs a working strace (ptrace allowed)")
async def test_7_3_one_write_syscall_per_record(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    log = tmp_path / "strace.log"
    child = script(tmp_path, SIZES_CHILD)
    strace = shutil.which("strace")
    assert strace is not None
    with trio.fail_after(60):
        await trio.run_process(
            [
                strace,
                "-f",
                "-qq",
                "-y",
                "-e",
                "trace=write,writev,pwrite64,pwritev",
                "-o",
                str(log),
                sys.executable,
                str(child),
                str(traces),
                "s",
                "d",
            ],
            capture_stdout=True,
        )
    path = traces / "d" / "s_001.jsonl"
    calls = [entry for entry in log.read_text().splitlines() if f"<{path}>" in entry]
    assert len(calls) == 3, calls
    sizes = [int(entry.rsplit("= ", 1)[1]) for entry in calls]
    records = path.read_bytes().split(b"\n")[:-1]
    assert sizes == [len(r) + 1 for r in records]
    assert [len(r) for r in records] == [
        len(record_bytes(om.user_text("z" * n))) - 1 for n in (10, 100_000, 4_000_000)
    ]


@pytest.mark.skipif(not _strace_works(), reason="needs a working strace (ptrace allowed)")
async def test_7_3_a_burst_is_one_open_and_one_write_per_record(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    log = tmp_path / "strace.log"
    child = script(tmp_path, BURST_SIZES_CHILD)
    strace = shutil.which("strace")
    assert strace is not None
    with trio.fail_after(60):
        await trio.run_process(
            [
                strace,
                "-f",
                "-qq",
                "-e",
                "trace=openat,open,write,writev,pwrite64,pwritev,close",
                "-y",
                "-o",
                str(log),
                sys.executable,
                str(child),
                str(traces),
                "s",
                "d",
            ],
            capture_stdout=True,
        )
    path = traces / "d" / "s_001.jsonl"
    entries = log.read_text().splitlines()
    appends = [e for e in entries if f'"{path}"' in e and "O_APPEND" in e]
    assert len(appends) == 2, appends  # one descriptor per burst
    writes = [e for e in entries if f"<{path}>" in e and "write" in e.split("(", 1)[0]]
    sizes = [int(entry.rsplit("= ", 1)[1]) for entry in writes]
    records = path.read_bytes().split(b"\n")[:-1]
    assert sizes == [len(r) + 1 for r in records]
    assert len(records) == 4
