"""Background commands as the host sees them (reference 3.13, 4.12, 4.13) and the Environment's
promise that no process outlives it."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import pytest
import trio

import penguin

from .processes import (
    alive,
    env_processes,
    exec_command,
    first_line,
    has_exited,
    launch,
    pid_of,
    process_id_in,
    registered,
    start_in_background,
    wait_gone,
    wait_until,
)

pytestmark = pytest.mark.usefixtures("hermetic_home", "no_stray_processes")

PYTHON = shlex.quote(sys.executable)


async def in_background(env: penguin.Environment, cmd: str) -> str:
    out = await exec_command(env, cmd, run_in_background=True)
    assert out.stop_reason == "completed", out.output
    return process_id_in(out.output)


def pending_reports(env: penguin.Environment) -> int:
    return env.background_reports.statistics().current_buffer_used


async def test_3_13_report_text_and_4000_char_tail(env: penguin.Environment) -> None:
    cmd = r"head -c 5000 /dev/zero | tr '\0' a; printf END; exit 3"
    process_id = await in_background(env, cmd)
    with trio.fail_after(10):
        report = await env.background_reports.receive()
    tail = "a" * 3997 + "END"
    assert (report.kind, report.id, report.label) == ("command", process_id, cmd)
    assert (report.status, report.detail) == ("failed", "exit code 3")
    assert report.output == "[earlier output dropped: exceeded 4000 chars]\n" + tail
    assert report.text() == (
        "[background_task_done]\n"
        "Automatic notification from the harness, not the user: "
        "a background task you started has finished.\n"
        "kind: command\n"
        f"id: {process_id}\n"
        "status: failed\n"
        "detail: exit code 3\n"
        "[/background_task_done]\n"
        "\n"
        f"Background command failed: `{cmd}` (process_id {process_id}) — exit code 3\n"
        "\n"
        "[earlier output dropped: exceeded 4000 chars]\n" + tail
    )
    # The session stays registered, exited, until something removes it.
    assert not registered(env)[process_id].running


async def test_3_13_1_success_signal_and_label(env: penguin.Environment) -> None:
    ok = await in_background(env, "echo ok")
    with trio.fail_after(10):
        report = await env.background_reports.receive()
    assert (report.id, report.status, report.detail, report.output) == (
        ok,
        "completed",
        "exit code 0",
        "ok\n",
    )
    assert report.text().endswith(
        f"Background command finished: `echo ok` (process_id {ok}) — exit code 0\n\nok\n"
    )

    long_first_line = "echo " + "x" * 200 + "\nkill -TERM $$"
    killed = await in_background(env, long_first_line)
    with trio.fail_after(10):
        report = await env.background_reports.receive()
    assert (report.id, report.status, report.detail) == (
        killed,
        "failed",
        "terminated by signal SIGTERM",
    )
    assert report.label == ("echo " + "x" * 200)[:119] + "…"


async def test_3_13_1_no_report_for_commands_not_launched_in_background(
    env: penguin.Environment,
) -> None:
    process_id = await start_in_background(env, "read x; echo bye")  # registered at window end
    out = await exec_command(env, "echo foreground")
    assert out.output == "foreground\n"
    await env.kill_background_command(process_id)
    assert env.take_background_reports() == []


async def test_3_13_4_reports_wait_for_a_listener_and_stop_after_close(workspace: Path) -> None:
    config = penguin.EnvironmentConfig(workspace_dir=workspace)
    async with penguin.Environment.open(config) as env:
        first = await in_background(env, "echo one")
        await wait_until(lambda: pending_reports(env) == 1)  # nobody listens yet: it waits
        [report] = env.take_background_reports()
        assert (report.id, report.output) == (first, "one\n")

        await in_background(env, "echo two")  # finished, never read
        await wait_until(lambda: pending_reports(env) == 1)
        running = await in_background(env, "sleep 1000")  # still running at close
        pid = await pid_of(env, running)
    assert env.take_background_reports() == []  # the pending one was dropped at close
    with pytest.raises(trio.EndOfChannel):
        env.background_reports.receive_nowait()
    assert not alive(pid)


async def test_4_13_host_surface(env: penguin.Environment) -> None:
    before = time.time()
    a = await in_background(env, "sleep 1000")
    b, _ = await launch(env, "read x")
    c = await in_background(env, "exit 0")
    await wait_until(has_exited(env, c))
    after = time.time()

    listing = env.list_background_commands()
    assert [command.process_id for command in listing] == [a, b, c]
    by_id = {command.process_id: command for command in listing}
    assert (by_id[a].cmd, by_id[b].cmd, by_id[c].cmd) == ("sleep 1000", "read x", "exit 0")
    assert [by_id[i].running for i in (a, b, c)] == [True, True, False]
    for command in listing:
        assert command.cwd == str(env.workspace_dir)
        assert before <= command.started_at <= after
        assert command.service_url is None
    pid = await pid_of(env, a)
    assert alive(pid)

    assert await env.kill_background_command(a) is True
    assert not alive(pid)
    assert await env.kill_background_command(a) is False
    assert await env.kill_background_command("proc-00000000") is False
    assert [command.process_id for command in env.list_background_commands()] == [b, c]
    with trio.fail_after(10):
        report = await env.background_reports.receive()
    assert report.id == c  # the host's kill of a sent none
    assert env.take_background_reports() == []


async def test_4_13_probe_finds_a_listening_port(env: penguin.Environment) -> None:
    process_id, first = await launch(
        env,
        f'exec {PYTHON} -c "import socket, time\n'
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
        'print(s.getsockname()[1], flush=True); time.sleep(1000)"',
    )
    port = int(await first_line(env, process_id, first))
    await env.probe_background_command_services()
    assert registered(env)[process_id].service_url == f"http://localhost:{port}"


async def test_4_12_closing_the_environment_ends_every_process(workspace: Path) -> None:
    config = penguin.EnvironmentConfig(workspace_dir=workspace)
    async with penguin.Environment.open(config) as env:
        await in_background(env, "sleep 1000")
        await start_in_background(env, "sleep 1000 | sleep 1000")
        daemon = (
            "setsid -f sh -c 'echo $$ > daemon.pid; exec sleep 1000' </dev/null >/dev/null 2>&1; "
            "sleep 1000"
        )
        await in_background(env, daemon)
        pid_file = workspace / "daemon.pid"
        await wait_until(lambda: pid_file.exists() and pid_file.read_text().endswith("\n"))
        daemon_pid = int(pid_file.read_text())
        pids = [p.pid for p in env_processes(env)]
        assert daemon_pid in pids
        assert len(pids) >= 5
    await wait_gone(pids, within=1)
    with pytest.raises(penguin.EnvironmentClosedError):
        await exec_command(env, "true")


async def test_a_cancelled_owner_ends_every_session_promptly(workspace: Path) -> None:
    config = penguin.EnvironmentConfig(workspace_dir=workspace)
    with trio.CancelScope() as owner:
        async with penguin.Environment.open(config) as env:
            env._commands.grace = 20.0  # waiting out a grace period would be unmistakable
            await in_background(env, "sleep 1000")
            await start_in_background(env, "sleep 1000")
            pids = [await pid_of(env, c.process_id) for c in env.list_background_commands()]
            started = time.monotonic()
            owner.cancel()
            await trio.sleep_forever()
    assert time.monotonic() - started < 10  # both obey SIGTERM: no grace period waited out
    await wait_gone(pids, within=1)


HOST_EXITS_WITH_AN_OPEN_ENVIRONMENT = """
import sys, threading, trio, penguin
from penguin import protocol as om

started = threading.Event()

async def main():
    config = penguin.EnvironmentConfig(workspace_dir=sys.argv[1])
    async with penguin.Environment.open(config) as env:
        args = {"description": "t", "cmd": "sleep 1000 | sleep 1000", "run_in_background": True}
        await env.call_tool(om.tool_call("exec_command", args, "c1"))
        while env.list_background_commands()[0].pid is None:  # listed before it starts
            await trio.sleep(0.01)
        print(env.list_background_commands()[0].pid, flush=True)
        started.set()
        await trio.sleep_forever()

threading.Thread(target=trio.run, args=(main,), daemon=True).start()
started.wait(30)
"""  # the main thread returns: the interpreter exits with the Environment open


async def test_4_11_host_process_exit_kills_every_live_session(workspace: Path) -> None:
    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, "-c", HOST_EXITS_WITH_AN_OPEN_ENVIRONMENT, str(workspace)],
            capture_stdout=True,
        )
    root = int(done.stdout)
    await wait_gone([root], within=1)
