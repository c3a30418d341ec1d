"""Issue 21.1: every line a command prints is delivered exactly once, by a poll or the report.

The cause of the line ``benchmarks/stress_sessions.py`` (b) once lost (63,999 of 64,000):
the benchmark sets ``PYTHONUNBUFFERED=1``, which its printers inherit, so each
``print(ident, i)`` is several ``write(2)`` calls (``"5"``, ``" "``, ``"999"``,
``"\\n"``). When a poll's window ended between two of them, that poll delivered the
line's head and the next poll (or the report) its tail; every byte was delivered once,
but the benchmark parsed each delivery on its own, so neither half read as a line.
Reproduced (16 x 2,000, unbuffered): 31,999 of 32,000 with exactly one poll whose output
ended mid-line. A reader of a command's output must read it as one stream, in delivery
order: the polls, then the report (after the exit the report and any poll first read what
the pipe holds themselves, so nothing is delivered after the report).

Found on the way, and fixed: after an exit the poll's drain and the report only waited
for the pump; a pump the loop did not run within 1 s cost its output. They now read the
pipe themselves (:meth:`CommandSession.pull`).

Deterministic tests (a real pipe, no process, no sleep; MockClock where time passes): the
window that ends inside a line; the poll and the report delivering what a starved pump
never read; no step of the pump leaving a chunk out of both the pipe and the buffer. Then
a small (b) 20 times with every core kept busy, every line counted.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import os
import re
import shlex
import subprocess
import sys
import termios
import uuid
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

import penguin
from penguin import protocol as om
from penguin.environment._closeout import NO_OUTPUT
from penguin.environment.supervisor import CommandSession, ExitStatus
from penguin.environment.supervisor._commands import POST_EXIT_DRAIN_LIMIT

pytestmark = pytest.mark.usefixtures("hermetic_home", "no_stray_processes")

LINES = b"".join(f"7 {n}\n".encode() for n in range(1, 201))


def _in_pipe(fd: int) -> int:
    count = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count, True)
    return count[0]


@contextmanager
def _pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    try:
        yield read_end, write_end
    finally:
        for fd in (read_end, write_end):
            with contextlib.suppress(OSError):
                os.close(fd)


def _session(tmp_path: Path, read_end: int) -> CommandSession:
    session = CommandSession(f"proc-{uuid.uuid4().hex[:8]}", "printer", tmp_path, "owner")
    session.attach_output(read_end)
    return session


def _exit(session: CommandSession) -> None:
    """What the watcher does when the root exits (before the output is closed)."""
    session.exit_status = ExitStatus(code=0)
    session.exited.set()


class _Conservation(trio.abc.Instrument):
    """After every step of the pump: every byte written is in the pipe, the buffer, or drained."""

    def __init__(self, pump_name: str, read_end: int, session: CommandSession) -> None:
        self.pump_name = pump_name
        self.read_end = read_end
        self.session = session
        self.written = 0
        self.drained = 0
        self.steps = 0
        self.broken: list[str] = []

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if self.pump_name not in task.name:
            return
        self.steps += 1
        held = len(self.session.buffer)
        accounted = self.drained + held + _in_pipe(self.read_end)
        if not self.session.output_closed.is_set() and accounted != self.written:
            self.broken.append(f"step {self.steps}: {self.written - accounted} bytes in flight")


async def test_21_1_a_window_that_ends_inside_a_line_delivers_each_half_once(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    with _pipe() as (read_end, write_end):
        session = _session(tmp_path, read_end)
        stream = trio.lowlevel.FdStream(os.dup(read_end))
        deliveries: list[str] = []

        async def emit(text: str) -> None:
            deliveries.append(text)

        async def poll(window: float, ended: list[bool]) -> None:
            ended.append(await session.collect(window, emit))

        first: list[bool] = []
        last: list[bool] = []
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(session._pump, stream)
                os.write(write_end, b"5 998\n5")  # the head of "5 999\n", as print writes it
                nursery.start_soon(poll, 1.0, first)
                await trio.testing.wait_all_tasks_blocked()
                mock_clock.jump(1.0)  # the window ends between two writes of one line
                await trio.testing.wait_all_tasks_blocked()
                assert first == [False]
                os.write(write_end, b" 999\n")
                os.close(write_end)
                _exit(session)
                nursery.start_soon(poll, 1.0, last)
        finally:
            await stream.aclose()
    assert last == [True]
    assert deliveries == ["5 998\n5", " 999\n"]
    per_delivery = [m.group(0) for d in deliveries for m in LINE.finditer(d)]
    assert per_delivery == ["5 998"]  # how the benchmark read it: "5 999" lost
    assert [m.group(0) for m in LINE.finditer("".join(deliveries))] == ["5 998", "5 999"]


async def test_21_1_no_step_of_the_pump_holds_a_chunk_out_of_the_pipe_and_the_buffer(
    tmp_path: Path,
) -> None:
    with _pipe() as (read_end, write_end):
        session = _session(tmp_path, read_end)
        stream = trio.lowlevel.FdStream(os.dup(read_end))
        check = _Conservation("_pump", read_end, session)
        trio.lowlevel.add_instrument(check)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(session._pump, stream)
                for n in range(50):
                    chunk = f"7 {n}\n".encode() * 50
                    os.write(write_end, chunk)
                    check.written += len(chunk)
                    await trio.testing.wait_all_tasks_blocked()
                    check.drained += len(session.buffer.drain())
                os.close(write_end)
                with trio.fail_after(5):
                    await session.output_closed.wait()
        finally:
            trio.lowlevel.remove_instrument(check)
            await stream.aclose()
        check.drained += len(session.buffer.drain())
    assert check.steps >= 50
    assert check.broken == []
    assert check.drained == check.written


@pytest.mark.parametrize("closed", [False, True], ids=["writer-open", "writer-closed"])
async def test_21_1_the_poll_and_the_report_deliver_what_the_pump_never_read(
    tmp_path: Path, closed: bool, autojump_clock: trio.testing.MockClock
) -> None:
    # The pump never runs (the starved extreme of the interleaving): the poll that sees
    # the exit and the report both decide the output is complete. Between them they
    # deliver every byte, once, and within their bounds (virtual time).
    with _pipe() as (read_end, write_end):
        session = _session(tmp_path, read_end)
        os.write(write_end, LINES)
        if closed:
            os.close(write_end)
        _exit(session)
        polled: list[str] = []
        reported: list[str] = []

        async def emit(text: str) -> None:
            polled.append(text)

        async def report() -> None:  # what CommandSupervisor._on_exit does
            await session.settle_output()
            reported.append(session.buffer.drain())

        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(report)
            assert await session.collect(1.0, emit)
        assert trio.current_time() - start <= POST_EXIT_DRAIN_LIMIT
        assert "".join(polled) + "".join(reported) == LINES.decode()
        assert session.output_closed.is_set() is closed


async def test_21_1_the_report_alone_delivers_what_the_pump_never_read(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # No poll at all: the report is the one reader, and the pump is starved.
    with _pipe() as (read_end, write_end):
        session = _session(tmp_path, read_end)
        os.write(write_end, LINES)
        _exit(session)
        await session.settle_output()
        assert session.buffer.drain() == LINES.decode()


# ---------------------------------------------------------------------------- under load

PRINTER = """\
import sys, time
ident, count, step = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
start = time.monotonic()
for i in range(1, count + 1):
    print(ident, i, flush=True)
    delay = start + i * step - time.monotonic()
    if delay > 0:
        time.sleep(delay)
"""
LINE = re.compile(r"^(\d+) (\d+)$", re.MULTILINE)
DROPPED = "[earlier output dropped: exceeded 4000 chars]\n"
PROCESS_ID = re.compile(r"process_id (proc-[0-9a-f]{8})")
BURNER = "while True: pass"


def _call(name: str, **args: object) -> om.OmniMessage[om.ToolCallPayload]:
    return om.tool_call(name, {"description": "21.1", **args}, f"t-{uuid.uuid4().hex[:6]}")


async def _small_b(env: penguin.Environment, script: Path, sessions: int, count: int) -> str:
    """Stress (b) in small: background printers polled with 1 s windows, reports read."""
    streams: dict[str, str] = defaultdict(str)  # process_id -> everything delivered, in order
    idents: dict[str, int] = {}

    async def drive(ident: int) -> None:
        cmd = f"{shlex.quote(sys.executable)} {script} {ident} {count} 0.001"
        out = await env.call_tool(_call("exec_command", cmd=cmd, run_in_background=True))
        match = PROCESS_ID.search(out.payload.output)
        assert match, out.payload.output
        process_id = match.group(1)
        idents[process_id] = ident
        while True:
            poll = _call("input_command", process_id=process_id, yield_time_ms=1000)
            out = await env.call_tool(poll)
            text, note, _ = out.payload.output.partition("[process still running")
            if not note and text == NO_OUTPUT:  # the exit, its output all in the report
                text = ""
            streams[process_id] += text.removesuffix("\n") if note else text  # the note's "\n"
            if not note:
                return

    async with trio.open_nursery() as nursery:
        for ident in range(sessions):
            nursery.start_soon(drive, ident)
    reports = 0
    dropped: set[int] = set()  # sessions whose report kept only its last 4000 chars
    while reports < sessions:  # each command reports once, whoever saw its exit
        with trio.fail_after(30):
            report = await env.background_reports.receive()
        reports += 1
        output = report.output
        if output.startswith(DROPPED):  # 3.13.2: the exit came long after the last poll
            dropped.add(idents[report.id])
            output = output[len(DROPPED) :].partition("\n")[2]  # its first line may be cut
        streams[report.id] += output
    seen: dict[int, list[int]] = defaultdict(list)
    for process_id, text in streams.items():
        for match in LINE.finditer(text):
            assert int(match.group(1)) == idents[process_id]
            seen[idents[process_id]].append(int(match.group(2)))
    wrong = [
        f"session {i}: {len(seen.get(i, []))} lines, "
        f"{'its report dropped output, ' if i in dropped else ''}"
        f"missing {_gaps(seen.get(i, []), count)[:3]}"
        for i in range(sessions)
        if not _delivered_once(seen.get(i, []), count, dropped=i in dropped)
    ]
    return "; ".join(wrong)


def _gaps(lines: list[int], count: int) -> list[tuple[int, int]]:
    """The runs of line numbers missing between those seen, as (first, last) pairs."""
    pairs = zip([0, *lines], [*lines, count + 1], strict=True)
    return [(a + 1, b - 1) for a, b in pairs if b > a + 1]


def _delivered_once(lines: list[int], count: int, *, dropped: bool) -> bool:
    """Every line 1..count once, in order; with ``dropped``, but for one run of them.

    A report keeps the last 4000 chars of what no poll delivered (3.13.2): when the exit
    comes long after the last poll (busy cores), the lines before those are dropped, one
    contiguous run, announced by the report. Nothing else may be missing or repeated.
    """
    if not dropped:
        return lines == list(range(1, count + 1))
    ordered = lines == sorted(set(lines))
    return ordered and len(_gaps(lines, count)) == 1 and bool(lines) and lines[-1] == count


@pytest.fixture
def busy_cores() -> Iterator[int]:
    """Every core kept busy by a CPU burner while the test runs; always killed after."""
    burners: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(os.cpu_count() or 1):
            burners.append(
                subprocess.Popen([sys.executable, "-c", BURNER], stdin=subprocess.DEVNULL)
            )
        yield len(burners)
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.wait()


async def test_21_1_small_stress_b_twenty_times_on_busy_cores_delivers_every_line_once(
    tmp_path: Path, busy_cores: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "printer.py"
    script.write_text(PRINTER)
    monkeypatch.setenv("PYTHONUNBUFFERED", "1")  # each print is several writes, as in (b)
    config = penguin.EnvironmentConfig(workspace_dir=tmp_path)
    failures = []
    async with penguin.Environment.open(config) as env:
        for run in range(20):
            wrong = await _small_b(env, script, sessions=16, count=2000)
            if wrong:
                failures.append(f"run {run}: {wrong}")
    assert busy_cores >= 1
    assert failures == []
