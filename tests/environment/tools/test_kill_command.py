"""kill_command (reference 3.4, 4.11) through a real Environment and real processes."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

import penguin

from ..processes import (
    alive,
    call,
    command_lines,
    exec_command,
    has_exited,
    input_command,
    kill_command,
    pid_of,
    process_id_in,
    registered,
    session_processes,
    start_in_background,
    wait_gone,
    wait_until,
)

pytestmark = pytest.mark.usefixtures("hermetic_home", "no_stray_processes")


def killed_note(process_id: str) -> str:
    return (
        f"[process {process_id} killed "
        "(SIGTERM to the process group, SIGKILL after a grace period)]"
    )


def unknown(process_id: str) -> str:
    return (
        f"[kill_command error: unknown process_id {process_id} "
        "(the session may have exited and been cleared)]"
    )


def buffered(env: penguin.Environment, process_id: str) -> bool:
    session = env._commands.get(process_id)
    return session is not None and bool(session.buffer)


@pytest.mark.parametrize("args", [{}, {"process_id": ""}, {"process_id": 3}])
async def test_3_4_1_missing_process_id(env: penguin.Environment, args: dict[str, Any]) -> None:
    out = await call(env, "kill_command", {"description": "t", **args})
    assert out.output == 'Missing required argument "process_id" for kill_command.'
    assert out.stop_reason == "failed"


async def test_3_4_1_unknown_process_id(env: penguin.Environment) -> None:
    out = await kill_command(env, "proc-0badc0de")
    assert (out.output, out.stop_reason) == (unknown("proc-0badc0de"), "failed")


async def test_3_4_2_kill_disarms_report_and_drains(env: penguin.Environment) -> None:
    out = await exec_command(env, "echo hello; sleep 1000", run_in_background=True)
    process_id = process_id_in(out.output)
    await wait_until(lambda: buffered(env, process_id))  # "hello" waits, undelivered
    out = await kill_command(env, process_id)
    assert out.output == "hello\n\n" + killed_note(process_id)
    assert out.stop_reason == "completed"
    assert env.list_background_commands() == []
    await wait_until(lambda: not session_processes(env, process_id), within=1)
    assert env.take_background_reports() == []  # a killed background command sends none


async def test_3_4_3_running_command_is_killed(env: penguin.Environment) -> None:
    process_id = await start_in_background(env, "sleep 1000")
    pid = await pid_of(env, process_id)
    out = await kill_command(env, process_id)
    assert (out.output, out.stop_reason) == (killed_note(process_id), "completed")
    assert not alive(pid)  # the call returns once the command is gone


@pytest.mark.parametrize(
    ("ending", "output", "status"),
    [
        ("echo bye; exit 4", "bye\n\n", "exit code 4"),
        ("exit 0", "", "exit code 0"),
        ("kill -KILL $$", "", "terminated by signal SIGKILL"),
    ],
)
async def test_3_4_3_already_exited_note(
    env: penguin.Environment, ending: str, output: str, status: str
) -> None:
    process_id = await start_in_background(env, f"while [ ! -e go ]; do sleep 0.01; done; {ending}")
    (env.workspace_dir / "go").touch()
    await wait_until(has_exited(env, process_id))
    out = await kill_command(env, process_id)
    note = f"[process {process_id} had already exited ({status}); session removed]"
    assert (out.output, out.stop_reason) == (output + note, "completed")
    assert env.list_background_commands() == []


async def test_3_4_3_second_kill_is_unknown(env: penguin.Environment) -> None:
    process_id = await start_in_background(env, "sleep 1000")
    assert (await kill_command(env, process_id)).stop_reason == "completed"
    out = await kill_command(env, process_id)
    assert (out.output, out.stop_reason) == (unknown(process_id), "failed")
    out = await input_command(env, process_id)
    assert out.stop_reason == "failed"


async def test_3_4_3_interrupted_before_it_runs_kills_nothing(env: penguin.Environment) -> None:
    process_id = await start_in_background(env, "sleep 1000")
    interrupt = trio.Event()
    interrupt.set()
    args = {"description": "t", "process_id": process_id}
    out = await call(env, "kill_command", args, interrupt=interrupt)
    assert (out.output, out.stop_reason) == ("[interrupted: tool aborted by user]", "aborted")
    assert registered(env)[process_id].running
    await kill_command(env, process_id)


async def test_4_11_kill_is_term_then_kill_after_grace(env: penguin.Environment) -> None:
    signals = env.workspace_dir / "signals"
    # Records the SIGTERM, then ignores it: only the SIGKILL a second later ends it.
    stubborn = await start_in_background(
        env, "trap 'echo TERM >> signals' TERM; : > armed; while :; do sleep 0.02; done"
    )
    plain = await start_in_background(env, "sleep 1000")
    await wait_until((env.workspace_dir / "armed").exists)  # a TERM before the trap kills

    out = await kill_command(env, plain)
    assert out.output == killed_note(plain)

    started = time.monotonic()
    out = await kill_command(env, stubborn)
    elapsed = time.monotonic() - started
    # What the shell printed while it was being stopped comes first, then the note.
    assert out.output.endswith(killed_note(stubborn))
    assert elapsed >= 0.95  # SIGKILL only after the grace period
    assert signals.read_text() == "TERM\n"
    await wait_until(lambda: not session_processes(env, stubborn), within=1)


async def test_4_11_kill_reaches_processes_that_left_the_group(env: penguin.Environment) -> None:
    # One child in the tree but in its own session; one double-forked daemon that is
    # in neither the group nor the tree: the owner marker still finds it.
    cmd = (
        "setsid sleep 1000 & echo $!; "
        "setsid -f sh -c 'echo $$ > daemon.pid; exec sleep 1000' </dev/null >/dev/null 2>&1; "
        "while [ ! -s daemon.pid ]; do sleep 0.01; done; cat daemon.pid; sleep 1000"
    )
    process_id = await start_in_background(env, cmd)

    def sleepers() -> list[int]:
        lines = command_lines(session_processes(env, process_id))
        return [pid for pid, line in lines.items() if line == ["sleep", "1000"]]

    await wait_until(lambda: len(sleepers()) == 3)
    pids = sleepers()
    out = await kill_command(env, process_id)
    assert out.stop_reason == "completed"
    await wait_gone(pids, within=1)
