"""The command supervisor on its own (reference 3.13, 4.1, 4.3, 4.5, 4.12, 4.14), real processes.

A :class:`CommandSupervisor` is built directly in the test's nursery, with a small
cap so eviction is cheap to reach.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from penguin.environment.supervisor import (
    BackgroundReport,
    CommandSession,
    CommandSupervisor,
    Exited,
    ExitStatus,
    Running,
    SupervisorClosedError,
    report_label,
    resolve_shell,
)
from penguin.environment.supervisor._commands import report_output

from ..processes import alive, marked_processes, spawned_tasks, wait_gone, wait_until

pytestmark = pytest.mark.usefixtures("hermetic_home", "no_stray_processes")

DAY = 24 * 3600.0
PYTHON = shlex.quote(sys.executable)


def new_supervisor(nursery: trio.Nursery, cap: int = 3) -> CommandSupervisor:
    return CommandSupervisor(
        nursery,
        tag=f"test-{uuid.uuid4().hex[:8]}",
        vault={},
        proxy=lambda: None,
        shell=resolve_shell(os.environ),
        cap=cap,
    )


@asynccontextmanager
async def open_supervisor() -> AsyncIterator[CommandSupervisor]:
    """A supervisor in a nursery of its own, closed (every session ended) on the way out."""
    async with trio.open_nursery() as nursery:
        commands = new_supervisor(nursery)
        try:
            yield commands
        finally:
            await commands.aclose()
            nursery.cancel_scope.cancel()


@pytest.fixture
async def supervisor() -> AsyncIterator[CommandSupervisor]:
    async with open_supervisor() as commands:
        yield commands


async def start(commands: CommandSupervisor, cmd: str, cwd: Path) -> CommandSession:
    session = await commands.spawn(cmd, cwd)
    commands.register(session)
    return session


async def next_line(session: CommandSession) -> str:
    """What the command prints up to a newline, however many reads it arrives in.

    (With ``PYTHONUNBUFFERED`` set, as on CI, ``print`` writes each piece separately.)
    """
    text = ""
    with trio.fail_after(5):
        while not text.endswith("\n"):
            await wait_until(lambda: bool(session.buffer))
            text += session.buffer.drain()
    return text


def listed(commands: CommandSupervisor) -> list[str]:
    return [c.process_id for c in commands.list()]


class Emitted:
    """An ``emit`` for a window: keeps what it is handed, in order."""

    def __init__(self) -> None:
        self.chunks: list[str] = []

    async def __call__(self, text: str) -> None:
        self.chunks.append(text)

    @property
    def text(self) -> str:
        return "".join(self.chunks)


async def gather(commands: CommandSupervisor, session: CommandSession, window: float) -> str:
    emitted = Emitted()
    await commands.collect(session, window, emitted)
    return emitted.text


# ---------------------------------------------------------------------------- 4.1, 4.3


async def test_4_1_evicts_exited_then_lru_running(
    supervisor: CommandSupervisor, workspace: Path
) -> None:
    a = await start(supervisor, "sleep 1000", workspace)
    b = await start(supervisor, "exit 0", workspace)
    c = await start(supervisor, "sleep 1000", workspace)
    with trio.fail_after(5):
        await b.exited.wait()

    d = await start(supervisor, "sleep 1000", workspace)  # full: the exited one goes first
    assert listed(supervisor) == [a.process_id, c.process_id, d.process_id]
    assert supervisor.get(b.process_id) is None

    assert supervisor.get(a.process_id) is a  # a lookup refreshes a
    e = await start(supervisor, "sleep 1000", workspace)  # no exited one: c is the LRU
    assert listed(supervisor) == [a.process_id, d.process_id, e.process_id]
    with trio.fail_after(5):
        await c.ended.wait()  # eviction kills
    assert not alive(c.spawned.pid)

    supervisor.write(d, "")  # a stdin write refreshes d
    supervisor.interrupt(e)  # so does Ctrl-C (sleep dies of it)
    with trio.fail_after(5):
        await e.exited.wait()  # eviction must see e exited, not merely interrupted
    f = await start(supervisor, "sleep 1000", workspace)  # e exited: it goes first
    assert listed(supervisor) == [a.process_id, d.process_id, f.process_id]
    g = await start(supervisor, "sleep 1000", workspace)  # a was used least recently
    assert listed(supervisor) == [d.process_id, f.process_id, g.process_id]
    with trio.fail_after(5):
        await a.ended.wait()
    await wait_gone([a.spawned.pid, e.spawned.pid])


async def test_4_3_idle_sweep_removes_sessions_unaccessed_for_ten_days(
    mock_clock: trio.testing.MockClock, workspace: Path
) -> None:
    mock_clock.rate = 1.0  # real processes: let virtual time run with real time
    async with open_supervisor() as commands:
        old = await start(commands, "sleep 1000", workspace)
        fresh = await start(commands, "sleep 1000", workspace)
        mock_clock.jump(9 * DAY)
        assert commands.get(fresh.process_id) is fresh
        assert listed(commands) == [old.process_id, fresh.process_id]  # listing: no refresh
        mock_clock.jump(DAY + 3600)  # the hourly sweep runs 10 days and 1 hour in
        with trio.fail_after(5):
            await old.ended.wait()
        assert listed(commands) == [fresh.process_id]
        assert fresh.running


async def test_4_3_the_hourly_sweep_counts_from_the_first_registration(
    mock_clock: trio.testing.MockClock, workspace: Path
) -> None:
    mock_clock.rate = 1.0
    async with open_supervisor() as commands:
        session = await commands.spawn("sleep 1000", workspace)
        commands.register(session)  # starts the sweep's task, which has not run yet
        mock_clock.jump(10 * DAY + 3600)  # before it runs: its first hour is long past
        with trio.fail_after(5):
            await session.ended.wait()
        assert listed(commands) == []


# ---------------------------------------------------------------------------- 3.2.9


async def test_3_2_9_wait_released_returns_once_an_exited_commands_group_is_ended(
    supervisor: CommandSupervisor, workspace: Path
) -> None:
    kept = await start(supervisor, "sleep 1000", workspace)  # registered: not waited for
    emitted = Emitted()
    # The root exits at once; its child stays in the group until the session ends it,
    # which happens in the session's task after run_window returned.
    ended = await supervisor.run_window(
        "sleep 1000 >/dev/null & echo $!", workspace, window=5, emit=emitted
    )
    assert isinstance(ended, Exited)
    child = int(emitted.text)
    with trio.fail_after(10):
        await supervisor.wait_released()
    assert not alive(child)
    assert kept.running
    await supervisor.remove(kept)


# ---------------------------------------------------------------------------- 20.5: watched windows


async def test_20_5_a_command_that_ends_in_its_window_runs_without_a_task_of_its_own(
    supervisor: CommandSupervisor, workspace: Path
) -> None:
    emitted = Emitted()
    await supervisor.remove(await supervisor.spawn("true", workspace))  # the login env
    with spawned_tasks() as spawned:
        ended = await supervisor.run_window("echo 1; echo 2 >&2", workspace, window=5, emit=emitted)
    assert ended == Exited(ExitStatus(code=0))
    assert emitted.text == "1\n2\n"
    # No session task, pump or watcher ran during the window: the call was its own pump
    # and watcher. Its one task starts as the call returns, to end the command's group.
    assert [name.rsplit(".", 1)[-1] for name in spawned] == ["adopt"]
    with trio.fail_after(10):
        await supervisor.wait_released()
    assert not marked_processes(supervisor.tag + "/")


async def test_4_5_a_window_handed_over_mid_output_delivers_every_line_once(
    supervisor: CommandSupervisor, workspace: Path
) -> None:
    # Lines keep coming while the first window ends and the session's task takes over
    # from the caller; every line arrives once, in order, across the windows.
    script = (
        "import sys, time\nfor i in range(400):\n    print(i, flush=True)\n    time.sleep(0.001)"
    )
    emitted = Emitted()
    with trio.fail_after(30):
        ended = await supervisor.run_window(
            f"{PYTHON} -c {shlex.quote(script)}", workspace, window=0.05, emit=emitted
        )
        assert not isinstance(ended, Exited)
        session = supervisor.get(ended.process_id)
        assert session is not None
        while not isinstance(ended, Exited):
            ended = await supervisor.poll_window(session, 0.05, emitted)
    assert ended.status == ExitStatus(code=0)
    assert emitted.text == "".join(f"{i}\n" for i in range(400))


async def test_4_5_a_flood_that_ends_in_its_window_is_delivered_whole(
    supervisor: CommandSupervisor, workspace: Path
) -> None:
    received = 0

    async def emit(text: str) -> None:
        nonlocal received
        assert set(text) == {"a"}
        received += len(text)

    with trio.fail_after(30):
        ended = await supervisor.run_window(
            "head -c 3000000 /dev/zero | tr '\\0' a", workspace, window=20, emit=emit
        )
    assert ended == Exited(ExitStatus(code=0))
    assert received == 3_000_000


async def test_3_2_a_cancelled_window_ends_the_command_it_watched(
    supervisor: CommandSupervisor, workspace: Path
) -> None:
    with trio.move_on_after(0.5) as scope:
        await supervisor.run_window("sleep 1000", workspace, window=60, emit=Emitted())
    assert scope.cancelled_caught
    with trio.fail_after(10):
        await supervisor.wait_released()
    assert not marked_processes(supervisor.tag + "/")
    assert supervisor.list() == []


async def test_3_2_a_window_cancelled_at_any_moment_leaves_nothing(
    supervisor: CommandSupervisor, workspace: Path
) -> None:
    await supervisor.remove(await supervisor.spawn("true", workspace))  # the login env
    for attempt in range(24):
        with trio.move_on_after(attempt * 0.0005):
            await supervisor.run_window("echo x; sleep 1000", workspace, window=60, emit=Emitted())
        with trio.fail_after(10):
            await supervisor.wait_released()
        assert not marked_processes(supervisor.tag + "/")
    assert supervisor.list() == []


async def test_4_12_closing_ends_a_command_whose_window_its_caller_watches(
    workspace: Path,
) -> None:
    emitted = Emitted()
    results: list[Exited | Running] = []

    async def window(commands: CommandSupervisor) -> None:
        results.append(
            await commands.run_window("echo up; sleep 1000", workspace, window=60, emit=emitted)
        )

    async with trio.open_nursery() as nursery:
        commands = new_supervisor(nursery)
        nursery.start_soon(window, commands)
        await wait_until(lambda: emitted.chunks == ["up\n"])
        started = time.monotonic()
        with trio.fail_after(10):
            await commands.aclose()
        # Closing woke the caller's wait: the group was ended, not left for the window.
        assert time.monotonic() - started < 5
    assert results == [Exited(ExitStatus(signal_name="SIGTERM"))]
    assert not marked_processes(commands.tag + "/")


# ---------------------------------------------------------------------------- 4.5


async def test_4_5_collect_streams_then_drains_after_exit(
    supervisor: CommandSupervisor, workspace: Path
) -> None:
    session = await supervisor.spawn("echo one; echo two >&2; exit 0", workspace)
    with trio.fail_after(5):
        text = await gather(supervisor, session, 60)
    assert text == "one\ntwo\n"
    assert session.exit_status == ExitStatus(code=0)
    supervisor.discard(session)


async def test_4_5_a_flood_cannot_hold_a_window_open(
    supervisor: CommandSupervisor, workspace: Path
) -> None:
    session = await supervisor.spawn("yes", workspace)
    received = 0

    async def emit(text: str) -> None:  # a slow consumer: the buffer refills meanwhile
        nonlocal received
        received += len(text)
        await trio.sleep(0.002)

    started = time.monotonic()
    with trio.fail_after(5):
        exited = await supervisor.collect(session, 0.25, emit)
    assert not exited
    assert time.monotonic() - started < 2
    assert received > 0
    await supervisor.remove(session)


async def test_4_5_output_waiting_sees_what_the_pump_has_not_read(
    supervisor: CommandSupervisor, workspace: Path
) -> None:
    go = workspace / "go"
    session = await supervisor.spawn(
        "while [ ! -e go ]; do sleep 0.01; done; printf hello", workspace
    )
    # From here the loop is blocked, so the pump cannot run: what the shell writes once
    # "go" exists stays in the pipe, and only a look at the pipe itself can see it.
    # (A plain "printf hello" could be written, and pumped, before spawn returned.)
    go.touch()
    deadline = time.monotonic() + 10
    while not session.output_waiting() and time.monotonic() < deadline:
        time.sleep(0.01)  # noqa: ASYNC251 - blocking on purpose
    assert session.output_waiting()
    with trio.fail_after(5):
        await session.output_closed.wait()
    assert session.buffer.drain() == "hello"
    assert not session.output_waiting()
    supervisor.discard(session)


async def test_4_5_a_slow_consumer_loses_nothing_after_exit(
    supervisor: CommandSupervisor, workspace: Path
) -> None:
    # Output that a background child writes just after the foreground exit arrives in
    # the post-exit drain; an emit slower than that drain's 50 ms must still complete.
    session = await supervisor.spawn("(sleep 0.01; seq 1 3000) & exit 0", workspace)
    delivered: list[str] = []

    async def emit(text: str) -> None:
        await trio.sleep(0.08)
        delivered.append(text)

    with trio.fail_after(5):
        assert await supervisor.collect(session, 60, emit)
        await session.output_closed.wait()
    rest = session.buffer.drain()
    assert "".join(delivered) + rest == "".join(f"{n}\n" for n in range(1, 3001))
    await supervisor.remove(session)


async def test_4_5_write_then_collect_in_order(
    supervisor: CommandSupervisor, workspace: Path
) -> None:
    session = await start(supervisor, "cat", workspace)
    for part in ("a", "b", "c\n"):
        supervisor.write(session, part)
    text = ""
    with trio.fail_after(5):
        while text != "abc\n":
            text += await gather(supervisor, session, 0.05)
    supervisor.interrupt(session)
    with trio.fail_after(5):
        await session.exited.wait()
    assert session.exit_status == ExitStatus(signal_name="SIGINT")


# ---------------------------------------------------------------------------- 3.13 (sans IO)


def test_3_13_2_label_and_output() -> None:
    assert report_label("echo hi\necho there") == "echo hi"
    assert report_label("x" * 120) == "x" * 120
    assert report_label("x" * 121) == "x" * 119 + "…"
    assert report_output("a" * 4000) == "a" * 4000
    assert report_output("b" + "a" * 4000) == (
        "[earlier output dropped: exceeded 4000 chars]\n" + "a" * 4000
    )


def test_3_13_3_report_text() -> None:
    report = BackgroundReport(
        kind="command",
        id="proc-0000abcd",
        label="make test",
        status="failed",
        detail="exit code 2",
        output="boom\n",
    )
    assert report.text() == (
        "[background_task_done]\n"
        "Automatic notification from the harness, not the user: "
        "a background task you started has finished.\n"
        "kind: command\n"
        "id: proc-0000abcd\n"
        "status: failed\n"
        "detail: exit code 2\n"
        "[/background_task_done]\n"
        "\n"
        "Background command failed: `make test` (process_id proc-0000abcd) — exit code 2\n"
        "\n"
        "boom\n"
    )
    quiet = BackgroundReport(
        kind="subagent", id="subagent-1", label="p", status="completed", detail="", output=" \n"
    )
    assert quiet.text() == (
        "[background_task_done]\n"
        "Automatic notification from the harness, not the user: "
        "a background task you started has finished.\n"
        "kind: subagent\n"
        "id: subagent-1\n"
        "status: completed\n"
        "[/background_task_done]\n"
        "\n"
        "Background subagent finished: `p` (subagent_id subagent-1)"
    )


@pytest.mark.parametrize(
    ("status", "failed", "text"),
    [
        (ExitStatus(code=0), False, "exit code 0"),
        (ExitStatus(code=3), True, "exit code 3"),
        (ExitStatus(), True, "exit code unknown"),
        (ExitStatus(signal_name="SIGTERM"), True, "terminated by signal SIGTERM"),
        (ExitStatus(spawn_error="boom"), True, "spawn error: boom"),
        (ExitStatus.from_returncode(-9), True, "terminated by signal SIGKILL"),
        (ExitStatus.from_returncode(7), True, "exit code 7"),
    ],
)
def test_3_13_1_exit_status(status: ExitStatus, failed: bool, text: str) -> None:
    assert status.failed is failed
    assert status.describe() == text


# ---------------------------------------------------------------------------- 4.12-4.14


async def test_4_12_closed_supervisor(workspace: Path) -> None:
    async with trio.open_nursery() as nursery:
        commands = new_supervisor(nursery)
        running = await start(commands, "sleep 1000", workspace)
        loose = await commands.spawn("sleep 1000", workspace)  # never registered
        await commands.aclose()
        await commands.aclose()  # idempotent
        nursery.cancel_scope.cancel()
    assert running.ended.is_set()
    assert loose.ended.is_set()
    assert commands.list() == []
    assert commands.get(running.process_id) is None
    with pytest.raises(SupervisorClosedError, match=r"^command session manager disposed$"):
        await commands.spawn("true", workspace)
    await wait_gone([running.spawned.pid, loose.spawned.pid], within=1)
    with pytest.raises(trio.EndOfChannel):
        commands.reports.receive_nowait()


async def test_4_14_printed_url_and_listen_port_probe(
    supervisor: CommandSupervisor, workspace: Path
) -> None:
    printed = await start(
        supervisor,
        "printf '\\033[32mready\\033[0m at http://0.0.0.0:8123/app.\\n'; sleep 1000",
        workspace,
    )
    listener = await start(
        supervisor,
        f'{PYTHON} -c "import socket, time\n'
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
        "print('port', s.getsockname()[1], flush=True); time.sleep(1000)\"",
        workspace,
    )
    quiet = await start(supervisor, "sleep 1000", workspace)

    def urls() -> dict[str, str | None]:
        return {c.process_id: c.service_url for c in supervisor.list()}

    await wait_until(lambda: urls()[printed.process_id] is not None)
    assert urls()[printed.process_id] == "http://localhost:8123/app"
    port = int((await next_line(listener)).split()[1])

    await supervisor.probe_services()
    assert urls() == {
        printed.process_id: "http://localhost:8123/app",
        listener.process_id: f"http://localhost:{port}",
        quiet.process_id: None,
    }


async def test_spawn_cancelled_mid_start_leaves_nothing(
    supervisor: CommandSupervisor, workspace: Path
) -> None:
    await supervisor.remove(await supervisor.spawn("true", workspace))  # resolve the login env
    for attempt in range(24):
        started = time.monotonic()
        with trio.move_on_after(attempt * 0.0005) as scope:
            session = await supervisor.spawn("sleep 1000", workspace)
        assert time.monotonic() - started < 5  # never the release deadline (6 s)
        if not scope.cancelled_caught:
            await supervisor.remove(session)
        await wait_until(lambda: not marked_processes(supervisor.tag + "/"), within=2)
    assert supervisor.list() == []


async def test_20_5_a_known_login_environment_costs_no_checkpoint(
    supervisor: CommandSupervisor, workspace: Path
) -> None:
    # The first command waits for the login shell. Afterwards each of the three steps
    # of a command that asks for the environment gets it without a pass of the
    # scheduler; a cancelled spawn still starts nothing (the test above).
    await supervisor.remove(await supervisor.spawn("true", workspace))
    with trio.testing.assert_no_checkpoints():
        env = await supervisor.login_environment()
    assert env["PATH"]


def writers(names: list[str]) -> int:
    """How many stdin writers (``CommandSession._feed``) among these spawned tasks."""
    return sum(name.endswith("._feed") for name in names)


async def test_20_1_a_command_gets_its_stdin_writer_with_its_first_input(
    supervisor: CommandSupervisor, workspace: Path
) -> None:
    with spawned_tasks() as spawned:
        session = await start(supervisor, "cat", workspace)
        assert any(name.endswith("._pump") for name in spawned)
        assert writers(spawned) == 0  # most commands are never sent input
        supervisor.write(session, "one\n")
        supervisor.write(session, "two\n")
        text = await next_line(session)
        if text == "one\n":  # the two lines may come back in one read or in two
            text += await next_line(session)
        assert text == "one\ntwo\n"
        supervisor.write(session, "three\n")
        assert await next_line(session) == "three\n"
        assert writers(spawned) == 1
    await supervisor.remove(session)


async def test_20_1_input_sent_before_the_process_exists_is_written_first(
    supervisor: CommandSupervisor, workspace: Path
) -> None:
    session = supervisor.launch("cat", workspace, label="cat")  # spawns in its own task
    supervisor.write(session, "early\n")
    assert not session.started
    assert await next_line(session) == "early\n"
    supervisor.write(session, "late\n")
    assert await next_line(session) == "late\n"
    await supervisor.remove(session)


LISTEN_UNTIL_A_LINE = (
    f'{PYTHON} -c "import socket, sys, time\n'
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
    "print('port', s.getsockname()[1], flush=True)\n"
    "sys.stdin.readline(); s.close(); print('closed', flush=True); time.sleep(1000)\""
)


async def test_4_14_probe_at_most_every_five_seconds_and_an_empty_result_clears(
    mock_clock: trio.testing.MockClock, workspace: Path
) -> None:
    mock_clock.rate = 1.0
    async with open_supervisor() as commands:
        session = await start(commands, LISTEN_UNTIL_A_LINE, workspace)
        port = int((await next_line(session)).split()[1])
        await commands.probe_services()
        [listed_once] = commands.list()
        assert listed_once.service_url == f"http://localhost:{port}"

        commands.write(session, "\n")  # the port closes
        assert await next_line(session) == "closed\n"
        await commands.probe_services()  # too soon: the old value stays
        [listed_twice] = commands.list()
        assert listed_twice.service_url == f"http://localhost:{port}"

        mock_clock.jump(5)
        await commands.probe_services()  # nothing listens now: cleared
        [listed_again] = commands.list()
        assert listed_again.service_url is None


# ---------------------------------------------------------------------------- issue 9, items 5-6


async def test_9_5_a_signal_before_the_process_exists_is_sent_when_it_does(
    supervisor: CommandSupervisor, workspace: Path, hermetic_home: Path
) -> None:
    (hermetic_home / ".bash_profile").write_text("sleep 0.5\n")  # the probe takes 0.5 s
    session = supervisor.launch("sleep 30", workspace, label="sleep 30")
    assert supervisor.get(session.process_id) is session  # registered at once
    assert [c.pid for c in supervisor.list()] == [None]  # with no process yet
    supervisor.interrupt(session)  # Ctrl-C while the command waits for its process
    with trio.fail_after(10):
        await session.exited.wait()
    assert session.started  # it was started, then got the signal it was owed
    assert session.exit_status == ExitStatus(signal_name="SIGINT")
    with trio.fail_after(5):
        report = await supervisor.reports.receive()
    assert (report.status, report.detail) == ("failed", "terminated by signal SIGINT")
    supervisor.interrupt(session)  # exited: nothing left to signal, and no error


async def test_9_6_a_launch_removed_before_its_process_exists_starts_nothing(
    supervisor: CommandSupervisor, workspace: Path, hermetic_home: Path
) -> None:
    (hermetic_home / ".bash_profile").write_text("sleep 0.5\n")
    session = supervisor.launch("touch started", workspace, label="touch started")
    with trio.fail_after(5):
        await supervisor.remove(session)
    assert not session.started
    assert listed(supervisor) == []
    waiting = supervisor.launch("touch later", workspace, label="touch later")
    with trio.fail_after(10):
        report = await supervisor.reports.receive()  # the probe is over: this one ran
    assert (report.id, report.status) == (waiting.process_id, "completed")
    assert not (workspace / "started").exists()
    assert (workspace / "later").exists()


async def test_9_6_launch_after_close_is_refused(workspace: Path) -> None:
    async with trio.open_nursery() as nursery:
        commands = new_supervisor(nursery)
        await commands.aclose()
        with pytest.raises(SupervisorClosedError):
            commands.launch("true", workspace, label="true")
        nursery.cancel_scope.cancel()


async def test_4_11_a_forked_child_s_exit_ends_none_of_its_parent_s_commands(
    supervisor: CommandSupervisor, tmp_path: Path
) -> None:
    # A child of os.fork whose Python exits normally runs the parent's atexit hooks,
    # with a copy of this supervisor; the commands are the parent's, and stay.
    session = await start(supervisor, 'echo ready; read -r line; echo "got $line"', tmp_path)
    assert await next_line(session) == "ready\n"
    child = os.fork()
    if child == 0:  # pragma: no cover - the child: the hook, then out at once
        try:
            supervisor._kill_at_exit()
        finally:
            os._exit(0)
    _, status = await trio.to_thread.run_sync(os.waitpid, child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    session.send_input(b"more\n")  # a killed command would never answer
    assert await next_line(session) == "got more\n"
