"""exec_command (reference 3.2, 4.5, 4.7-4.11) through a real Environment and real processes.

Every test ends with nothing it started still running (``no_stray_processes``); the
login shell reads an empty HOME unless a test writes a profile.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import termios
import time
from functools import partial
from pathlib import Path
from typing import Any

import psutil
import pytest
import trio

import penguin
from penguin import protocol as om
from penguin.environment import ToolResult, ToolServices
from penguin.environment.supervisor import ProxyInject
from penguin.environment.tools.exec_command import ExecCommandTool
from penguin.environment.tools.input_command import InputCommandTool
from penguin.environment.tools.kill_command import KillCommandTool

from ..bare import run_bare
from ..processes import (
    alive,
    call,
    env_processes,
    exec_command,
    input_command,
    kill_command,
    launch,
    pid_of,
    process_id_in,
    registered,
    running_note,
    start_in_background,
    still_running_note,
    tool_definition,
    wait_gone,
    wait_until,
)

pytestmark = pytest.mark.usefixtures("hermetic_home", "no_stray_processes")

PYTHON = shlex.quote(sys.executable)
FD_KINDS = 'for fd in 0 1 2; do if [ -t $fd ]; then echo "$fd:tty"; else echo "$fd:pipe"; fi; done'


def background_note(process_id: str) -> str:
    return (
        f"[command running in background with process_id {process_id}; its completion will "
        "arrive as a user message — no need to poll. Use input_command to interact or "
        "kill_command to stop it]"
    )


def parse_env(dump: str) -> dict[str, str]:
    records = (record.partition("=") for record in dump.split("\0") if record)
    return {name: value for name, _, value in records}


# ---------------------------------------------------------------------------- 3.2.1-3.2.4


@pytest.mark.parametrize(
    ("name", "factory", "args"),
    [
        ("exec_command", ExecCommandTool, {"cmd": "true"}),
        ("input_command", InputCommandTool, {"process_id": "proc-00000000"}),
        ("kill_command", KillCommandTool, {"process_id": "proc-00000000"}),
    ],
)
async def test_3_2_1_no_command_manager(
    name: str, factory: Any, args: dict[str, Any], workspace: Path
) -> None:
    text = f"[{name} unavailable: no command session manager configured]"
    tool = factory(tool_definition(name), ToolServices())
    result, emitted = await run_bare(tool, args, workspace)
    assert emitted == [text]
    assert result == ToolResult(stop_reason="failed")


@pytest.mark.parametrize("args", [{}, {"cmd": ""}, {"cmd": 42}, {"cmd": None}, {"cmd": ["ls"]}])
async def test_3_2_1_missing_cmd(env: penguin.Environment, args: dict[str, Any]) -> None:
    out = await call(env, "exec_command", {"description": "test", **args})
    assert out.output == 'Missing required argument "cmd" for exec_command.'
    assert out.stop_reason == "failed"
    assert env.list_background_commands() == []


async def test_3_2_2_workdir_resolves_against_the_workspace(
    env: penguin.Environment, tmp_path: Path
) -> None:
    workspace = env.workspace_dir
    (workspace / "sub").mkdir()
    assert (await exec_command(env, "pwd", workdir="sub")).output == f"{workspace}/sub\n"
    assert (await exec_command(env, "pwd", workdir=str(tmp_path))).output == f"{tmp_path}\n"
    assert (await exec_command(env, "pwd", workdir="")).output == f"{workspace}\n"
    assert (await exec_command(env, "pwd", workdir=7)).output == f"{workspace}\n"
    assert (await exec_command(env, "pwd")).output == f"{workspace}\n"
    # No ~ expansion: "~" is a relative path like any other.
    assert (await exec_command(env, "true", workdir="~")).output.startswith(
        f"[spawn error: No such file or directory: '{workspace}/~'"
    )


@pytest.mark.parametrize("flag", ["true", 1, "yes", None])
async def test_3_2_2_run_in_background_only_when_exactly_true(
    env: penguin.Environment, flag: object
) -> None:
    out = await exec_command(env, "echo hi", run_in_background=flag)
    assert out.output == "hi\n"
    assert out.stop_reason == "completed"
    assert env.list_background_commands() == []


async def test_3_2_3_already_aborted_starts_nothing(env: penguin.Environment) -> None:
    interrupt = trio.Event()
    interrupt.set()
    for background in (False, True):
        args = {"description": "t", "cmd": "touch started", "run_in_background": background}
        out = await call(env, "exec_command", args, interrupt=interrupt)
        assert out.output == "[interrupted: tool aborted by user]"
        assert out.stop_reason == "aborted"
    assert not (env.workspace_dir / "started").exists()
    assert env.list_background_commands() == []
    assert env_processes(env) == []


async def test_3_2_4_spawn_error_missing_workdir(env: penguin.Environment) -> None:
    missing = env.workspace_dir / "missing"
    out = await exec_command(env, "echo hi", workdir="missing")
    assert out.output == f"[spawn error: No such file or directory: {str(missing)!r}]"
    assert out.stop_reason == "failed"
    assert env.list_background_commands() == []


async def test_3_2_4_spawn_error_workdir_is_a_file(env: penguin.Environment) -> None:
    # In the foreground; a background launch reports it instead (9.6 below).
    (env.workspace_dir / "file").write_text("x")
    out = await exec_command(env, "echo hi", workdir="file")
    assert out.output == f"[spawn error: Not a directory: {str(env.workspace_dir / 'file')!r}]"
    assert out.stop_reason == "failed"
    assert env.list_background_commands() == []


async def test_3_2_4_spawn_error_nul_byte_in_command(env: penguin.Environment) -> None:
    out = await exec_command(env, "echo a\0b")
    assert out.output == "[spawn error: embedded null byte]"
    assert out.stop_reason == "failed"


# ---------------------------------------------------------------------------- 3.2.5-3.2.10


async def test_3_2_5_background_launch_registers_at_once(env: penguin.Environment) -> None:
    with trio.fail_after(5):
        out = await exec_command(env, "sleep 1000", run_in_background=True)
    process_id = process_id_in(out.output)
    assert out.output == background_note(process_id)
    assert out.stop_reason == "completed"
    [command] = env.list_background_commands()
    assert (command.process_id, command.cmd, command.running) == (process_id, "sleep 1000", True)
    assert command.cwd == str(env.workspace_dir)
    killed = await kill_command(env, process_id)
    assert killed.stop_reason == "completed"
    assert env.take_background_reports() == []  # a killed command sends no report


async def test_3_2_6_output_streams_in_separate_deltas(env: penguin.Environment) -> None:
    go = env.workspace_dir / "go"
    cmd = "echo first; while [ ! -e go ]; do sleep 0.01; done; echo second"
    deltas: list[str] = []
    final = None
    request = om.tool_call("exec_command", {"description": "t", "cmd": cmd}, "call_1")
    with trio.fail_after(10):
        async with env.execute_tool(request) as stream:
            async for message in stream:
                payload = message.payload
                if isinstance(payload, om.PartialToolCallOutputPayload):
                    if payload.event_type == "delta":
                        deltas.append(payload.output)
                        if payload.output == "first\n":
                            go.touch()  # the second line exists only after the first arrived
                elif isinstance(payload, om.ToolCallOutputPayload):
                    final = payload
    assert deltas == ["first\n", "second\n"]
    assert final is not None
    assert (final.output, final.stop_reason) == ("first\nsecond\n", "completed")


async def test_3_2_6_abort_kills_the_group(env: penguin.Environment) -> None:
    interrupt = trio.Event()
    cmd = 'sleep 1000 & a=$!; sleep 1000 & echo "$$ $a $!"; wait'
    request = om.tool_call("exec_command", {"description": "t", "cmd": cmd}, "call_1")
    pids: list[int] = []
    final = None
    with trio.fail_after(10):
        async with env.execute_tool(request, interrupt=interrupt) as stream:
            async for message in stream:
                payload = message.payload
                if isinstance(payload, om.PartialToolCallOutputPayload):
                    if payload.event_type == "delta" and not pids:
                        pids = [int(pid) for pid in payload.output.split()]
                        interrupt.set()
                elif isinstance(payload, om.ToolCallOutputPayload):
                    final = payload
    assert final is not None
    assert final.output == f"{' '.join(map(str, pids))}\n\n[interrupted: tool aborted by user]"
    assert final.stop_reason == "aborted"
    assert len(pids) == 3
    await wait_gone(pids)
    assert env.list_background_commands() == []


async def test_3_2_6_timeout_kills_the_group(workspace: Path) -> None:
    # A timeout under the 250 ms window floor: the Environment's deadline fires first.
    config = penguin.EnvironmentConfig(
        workspace_dir=workspace, tools=[tool_definition("exec_command", timeout_ms=200)]
    )
    async with penguin.Environment.open(config) as env:
        out = await exec_command(env, "echo $$; exec sleep 1000")
        assert out.output.endswith("\n\n[tool timeout: exceeded 200ms]")
        assert out.stop_reason == "failed"
        await wait_gone([int(out.output.split()[0])])
        assert env.list_background_commands() == []


async def test_3_2_7_window_end_registers(env: penguin.Environment) -> None:
    started = time.monotonic()
    out = await exec_command(env, "echo started; read line; echo got $line", yield_time_ms=250)
    assert time.monotonic() - started < 5
    process_id = process_id_in(out.output)
    assert out.output == "started\n\n" + running_note(process_id)
    assert out.stop_reason == "completed"
    command = registered(env)[process_id]
    assert command.running
    assert alive(await pid_of(env, process_id))  # the process keeps running
    out = await input_command(env, process_id, "hi\n")
    assert (out.output, out.stop_reason) == ("got hi\n", "completed")


async def test_3_2_8_exit_code(env: penguin.Environment) -> None:
    out = await exec_command(env, "echo hi; exit 3")
    assert (out.output, out.stop_reason) == ("hi\n\n[exit code: 3]", "failed")
    out = await exec_command(env, "exit 255")
    assert (out.output, out.stop_reason) == ("[exit code: 255]", "failed")
    out = await exec_command(env, "true")
    assert (out.output, out.stop_reason) == ("[no output]", "completed")
    out = await exec_command(env, "printf done")
    assert (out.output, out.stop_reason) == ("done", "completed")


@pytest.mark.parametrize(("signal_name"), ["TERM", "KILL", "SEGV"])
async def test_3_2_8_signal_death_is_reported(env: penguin.Environment, signal_name: str) -> None:
    out = await exec_command(env, f"kill -{signal_name} $$")
    assert out.output == f"[terminated by signal SIG{signal_name}]"
    assert out.stop_reason == "failed"


async def test_3_2_9_foreground_exit_reaps_background_children(env: penguin.Environment) -> None:
    # A background child in the group, and a double-forked daemon in its own session
    # (reparented to init, so neither in the group nor in the tree): both must go.
    cmd = (
        "sleep 1000 & echo $!; "
        "setsid -f sh -c 'echo $$ > daemon.pid; exec sleep 1000' </dev/null >/dev/null 2>&1; "
        "while [ ! -s daemon.pid ]; do sleep 0.01; done; cat daemon.pid"
    )
    out = await exec_command(env, cmd)
    assert out.stop_reason == "completed", out.output
    pids = [int(pid) for pid in out.output.split()]
    assert len(pids) == 2
    await wait_gone(pids)
    await wait_until(lambda: not env_processes(env))
    assert env.list_background_commands() == []


async def test_3_2_9_completion_is_the_foreground_exit_not_pipe_eof(
    env: penguin.Environment,
) -> None:
    # The background child keeps the output pipe open; the call still ends at once.
    with trio.fail_after(5):
        out = await exec_command(env, "sleep 1000 & echo bye", yield_time_ms=60_000)
    assert (out.output, out.stop_reason) == ("bye\n", "completed")


async def test_3_2_10_process_id_format(env: penguin.Environment) -> None:
    ids = {await start_in_background(env, "sleep 1000") for _ in range(2)}
    ids.add(process_id_in((await exec_command(env, "sleep 1000", run_in_background=True)).output))
    assert len(ids) == 3
    for process_id in ids:
        assert re.fullmatch(r"proc-[0-9a-f]{8}", process_id)
    assert set(registered(env)) == ids


# ---------------------------------------------------------------------------- 4.5-4.11


async def test_4_5_stdout_stderr_arrival_order(env: penguin.Environment) -> None:
    out = await exec_command(env, "echo 1; echo 2 >&2; echo 3; echo 4 >&2; echo 5")
    assert out.output == "1\n2\n3\n4\n5\n"


async def test_4_8_isatty_false_by_default(env: penguin.Environment) -> None:
    out = await exec_command(env, FD_KINDS)
    assert out.output == "0:pipe\n1:pipe\n2:pipe\n"


async def test_4_8_child_leads_a_new_process_group(env: penguin.Environment) -> None:
    out = await exec_command(env, "ps -o pid=,pgid=,sid= -p $$")
    pid, pgid, sid = out.output.split()
    assert pid == pgid == sid


async def test_4_9_environment_rules_in_the_child(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = {
        "PORT": "8080",
        "host": "example.org",  # stripped in any casing
        "Force_Color": "1",
        "CLICOLOR_FORCE": "1",
        "PENGUIN_DESKTOP_TOKEN": "secret",
        "PENGUIN_SEED_ADMIN_PASSWORD": "secret",
        "PENGUIN_PASSES_THROUGH": "yes",
        "TERM": "xterm-256color",
        "GIT_PAGER": "less",
        "HTTP_PROXY": "http://proxy.example:1",
    }
    for key, value in host.items():
        monkeypatch.setenv(key, value)
    vault = {"PORT": "9999", "VAULT_TOKEN": "from-vault", "NO_COLOR": "0", "PAGER": "less"}
    config = penguin.EnvironmentConfig(workspace_dir=workspace, vault=vault)
    async with penguin.Environment.open(config) as env:
        child = parse_env((await exec_command(env, "env -0")).output)
        background, dump = await launch(env, "env -0; read line")
        owner = parse_env(dump)["PENGUIN_OWNER"]
        await kill_command(env, background)
        tag = env._commands.tag
    for stripped in ("host", "Force_Color", "CLICOLOR_FORCE", "PENGUIN_DESKTOP_TOKEN"):
        assert stripped not in child
    assert "PENGUIN_SEED_ADMIN_PASSWORD" not in child
    assert child["PORT"] == "9999"  # the vault may re-add a stripped key
    assert child["VAULT_TOKEN"] == "from-vault"
    assert child["PENGUIN_PASSES_THROUGH"] == "yes"
    assert child["HTTP_PROXY"] == "http://proxy.example:1"  # no policy: passes through
    hardened = {
        "GIT_EDITOR": "true",
        "GIT_TERMINAL_PROMPT": "0",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "PAGER": "cat",
        "GIT_PAGER": "cat",
    }
    assert {key: child[key] for key in hardened} == hardened
    assert re.fullmatch(re.escape(tag) + r"/proc-[0-9a-f]{8}", child["PENGUIN_OWNER"])
    assert owner == f"{tag}/{background}"


async def test_4_10_proxy_policies(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
        "HTTP_PROXY": "http://host:1",
        "http_proxy": "http://host:2",
        "HTTPS_PROXY": "http://host:3",
        "All_Proxy": "socks5://host:4",
        "NO_PROXY": "internal",
        "no_proxy": "internal-lower",
    }.items():
        monkeypatch.setenv(key, value)
    proxy_keys = {"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "All_Proxy"}

    async def child_env(policy: Any) -> list[dict[str, str]]:
        config = penguin.EnvironmentConfig(workspace_dir=workspace, proxy_policy=policy)
        async with penguin.Environment.open(config) as env:
            return [parse_env((await exec_command(env, "env -0")).output) for _ in range(2)]

    [stripped, _] = await child_env("strip")
    assert proxy_keys & stripped.keys() == set()
    assert (stripped["NO_PROXY"], stripped["no_proxy"]) == ("internal", "internal-lower")

    [injected, _] = await child_env(ProxyInject("http://proxy:3128", "localhost,.local"))
    for key in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        assert injected[key] == "http://proxy:3128"
    assert "All_Proxy" not in injected
    assert (injected["NO_PROXY"], injected["no_proxy"]) == ("localhost,.local", "localhost,.local")

    policies = iter([None, "strip"])
    first, second = await child_env(lambda: next(policies))  # re-read at every spawn
    assert first["HTTP_PROXY"] == "http://host:1"
    assert "HTTP_PROXY" not in second


async def test_4_9_login_environment_resolved_once(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "login-home"
    home.mkdir()
    logins = tmp_path / "logins"
    (home / ".bash_profile").write_text(
        "export PENGUIN_FROM_PROFILE=profiled\n"
        f"echo login >> {shlex.quote(str(logins))}\n"
        "echo 'a profile that talks'\n"
    )
    monkeypatch.setenv("HOME", str(home))
    async with penguin.Environment.open(penguin.EnvironmentConfig(workspace_dir=workspace)) as env:
        for _ in range(3):
            out = await exec_command(env, 'echo "$PENGUIN_FROM_PROFILE"')
            assert out.output == "profiled\n"
        process_id, first = await launch(env, 'echo "$PENGUIN_FROM_PROFILE"; read x', tty=True)
        assert await read_until(env, process_id, "\r\n", first) == "profiled\r\n"
        await kill_command(env, process_id)
    assert logins.read_text() == "login\n"


# ---------------------------------------------------------------------------- tty (beyond the spec)


async def test_tty_isatty_true(env: penguin.Environment) -> None:
    out = await exec_command(env, FD_KINDS, tty=True)
    assert out.output == "0:tty\r\n1:tty\r\n2:tty\r\n"
    out = await exec_command(env, "tty >/dev/null && echo has-a-controlling-terminal", tty=True)
    assert out.output == "has-a-controlling-terminal\r\n"


async def read_until(env: penguin.Environment, process_id: str, expected: str, seen: str) -> str:
    """Poll (250 ms windows) until ``expected`` appears in the output so far."""
    with trio.fail_after(10):
        while expected not in seen:
            out = await input_command(env, process_id, "", yield_time_ms=250)
            assert out.output.endswith(still_running_note(process_id)), out.output
            seen += out.output.removesuffix(still_running_note(process_id))
    return seen


async def test_tty_python_repl_via_input_command(env: penguin.Environment) -> None:
    process_id, first = await launch(env, f"{PYTHON} -q", tty=True)
    await read_until(env, process_id, ">>> ", first)
    out = await input_command(env, process_id, "print(6 * 7)\n")
    await read_until(env, process_id, "42\r\n>>> ", out.output)
    out = await input_command(env, process_id, "raise SystemExit(5)\n")
    assert out.output.endswith("[exit code: 5]")
    assert out.stop_reason == "failed"
    assert env.list_background_commands() == []


def terminal_echoes(pid: int) -> bool:
    """Whether the terminal on ``pid``'s stdin echoes input (read from the terminal itself)."""
    fd = os.open(f"/proc/{pid}/fd/0", os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
    try:
        return bool(termios.tcgetattr(fd)[3] & termios.ECHO)
    finally:
        os.close(fd)


def state_of(pid: int) -> str:
    """What ``pid`` is doing, for a failure's message: its state and kernel wait."""
    try:
        with open(f"/proc/{pid}/wchan") as wchan:
            waiting = wchan.read()
    except OSError:
        waiting = "?"
    status: str
    try:
        status = psutil.Process(pid).status()
    except psutil.Error as error:
        status = repr(error)
    return f"pid {pid}: {status}, waiting in {waiting!r}"


async def test_tty_password_prompt_with_read_s(env: penguin.Environment) -> None:
    cmd = "read -s -p 'Password: ' pw; echo; echo \"got ${#pw} chars\""
    process_id, first = await launch(env, cmd, tty=True)
    assert await read_until(env, process_id, "Password: ", first) == "Password: "
    pid = await pid_of(env, process_id)
    # bash prints the prompt, then turns the echo off: the password goes after that,
    # as a person types it after seeing the prompt (not after a fixed wait).
    with trio.move_on_after(10):
        while terminal_echoes(pid):  # noqa: ASYNC110 - a terminal's mode has no event
            await trio.sleep(0.01)
    assert not terminal_echoes(pid), state_of(pid)
    # The window ends when bash exits: its answer, however slow the machine, not a timer's.
    out = await input_command(env, process_id, "hunter2\n", yield_time_ms=10_000)
    assert "hunter2" not in out.output, out.output  # not echoed
    assert (out.output, out.stop_reason) == ("\r\ngot 7 chars\r\n", "completed"), state_of(pid)


async def test_tty_ctrl_c_still_reaches_the_group(env: penguin.Environment) -> None:
    process_id = await start_in_background(env, "sleep 1000 | sleep 1000", tty=True)
    pids = [p.pid for p in env_processes(env)]
    out = await input_command(env, process_id, "\u0003")
    assert (out.output, out.stop_reason) == ("[terminated by signal SIGINT]", "failed")
    await wait_gone(pids)


# ---------------------------------------------------------------------------- faults


async def test_invalid_utf8_is_decoded_with_replacement(env: penguin.Environment) -> None:
    out = await exec_command(env, r"printf 'caf\303\251 \377\376 end \342\202'")
    assert out.output == "café \ufffd\ufffd end \ufffd"


async def test_flood_answers_within_its_window_with_bounded_memory(
    env: penguin.Environment,
) -> None:
    with trio.fail_after(5):
        out = await exec_command(env, "yes", yield_time_ms=250)
    process_id = process_id_in(out.output)
    assert (
        out.output
        == "y\n" * 8000 + "\n[output truncated: exceeded 16000 chars]\n" + running_note(process_id)
    )
    session = env._commands.get(process_id)
    assert session is not None
    await wait_until(lambda: session.buffer.dropped > 0)  # nobody reads: the buffer overflows
    assert len(session.buffer) <= 1_048_576
    with trio.fail_after(5):
        out = await input_command(env, process_id, yield_time_ms=250)
    assert re.match(r"\[\.\.\. \d+ chars of earlier output dropped \.\.\.\]\ny\n", out.output)
    assert out.output.endswith(
        "\n[output truncated: exceeded 16000 chars]\n" + still_running_note(process_id)
    )
    await kill_command(env, process_id)


async def test_flood_that_ends_inside_a_foreground_window(env: penguin.Environment) -> None:
    with trio.fail_after(10):
        out = await exec_command(
            env, r"head -c 50M /dev/zero | tr '\0' x; echo; echo END", yield_time_ms=250
        )
    head = "x" * 16000 + "\n[output truncated: exceeded 16000 chars]"
    if out.output == head:  # the flood ended inside the window
        assert out.stop_reason == "completed"
    else:
        process_id = process_id_in(out.output)
        assert out.output == head + "\n" + running_note(process_id)
        await kill_command(env, process_id)


# ---------------------------------------------------------------------------- issue 9, item 6


def slow_login(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, seconds: float) -> None:
    """A HOME whose login profile takes ``seconds``: the one-time probe is that slow."""
    home = tmp_path / "slow-home"
    home.mkdir()
    (home / ".bash_profile").write_text(f"sleep {seconds}\nexport PENGUIN_SLOW_LOGIN=1\n")
    monkeypatch.setenv("HOME", str(home))


async def test_9_6_background_launch_with_missing_workdir_reports_spawn_error(
    env: penguin.Environment,
) -> None:
    # Spec 3.2.5 and 3.13.1: registered at once with the background note; the report
    # then says the command could not be started.
    missing = env.workspace_dir / "missing"
    error = f"No such file or directory: {str(missing)!r}"
    out = await exec_command(env, "echo hi", workdir="missing", run_in_background=True)
    process_id = process_id_in(out.output)
    assert (out.output, out.stop_reason) == (background_note(process_id), "completed")
    with trio.fail_after(10):
        report = await env.background_reports.receive()
    assert (report.kind, report.id, report.label) == ("command", process_id, "echo hi")
    assert (report.status, report.detail, report.output) == ("failed", f"spawn error: {error}", "")
    assert report.text().endswith(
        f"Background command failed: `echo hi` (process_id {process_id}) — spawn error: {error}"
    )
    [command] = env.list_background_commands()
    assert (command.process_id, command.running, command.pid) == (process_id, False, None)
    out = await kill_command(env, process_id)
    assert out.output == (
        f"[process {process_id} had already exited (spawn error: {error}); session removed]"
    )
    # Asked with input_command instead, the session answers with its exit (3.2.8).
    out = await exec_command(env, "echo hi", workdir="missing", run_in_background=True)
    process_id = process_id_in(out.output)
    out = await input_command(env, process_id, "\u0003")  # nothing to signal: not an error
    assert (out.output, out.stop_reason) == (f"[spawn error: {error}]", "failed")
    assert env.list_background_commands() == []


async def test_9_6_shell_messages_read_bash_line_1(env: penguin.Environment) -> None:
    out = await exec_command(env, "no-such-command-9-6")
    assert out.output == "bash: line 1: no-such-command-9-6: command not found\n\n[exit code: 127]"
    out = await exec_command(env, 'echo "$0"; echo "$(readlink /proc/$$/exe)"')
    bash = shutil.which("bash", path=os.environ["PATH"])
    assert bash is not None
    resolved = await trio.Path(bash).resolve()
    assert out.output == f"bash\n{resolved}\n"  # still the bash PATH names


async def test_9_6_400ms_timeout_on_the_first_command_of_a_fresh_environment(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The login probe (0.6 s here) is the Environment's, started when it opens: a
    # first command with a 400 ms timeout waits for it outside its own clock.
    slow_login(monkeypatch, tmp_path, 0.6)
    tools = [tool_definition("exec_command", timeout_ms=400)]
    for _ in range(3):
        config = penguin.EnvironmentConfig(workspace_dir=workspace, tools=tools)
        async with penguin.Environment.open(config) as env:
            started = time.monotonic()
            out = await exec_command(env, 'echo "hi $PENGUIN_SLOW_LOGIN"')
            assert (out.output, out.stop_reason) == ("hi 1\n", "completed")
            assert time.monotonic() - started >= 0.3  # it did wait for the probe


async def test_9_6_the_timeout_counts_from_the_end_of_the_login_wait(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow_login(monkeypatch, tmp_path, 0.6)
    tools = [tool_definition("exec_command", timeout_ms=200)]  # under the 250 ms window
    async with penguin.Environment.open(
        penguin.EnvironmentConfig(workspace_dir=workspace, tools=tools)
    ) as env:
        out = await exec_command(env, "echo $$; exec sleep 1000")
        assert out.output.endswith("\n\n[tool timeout: exceeded 200ms]")  # it still fires
        await wait_gone([int(out.output.split()[0])])


async def test_9_6_an_interrupt_ends_the_wait_for_the_login_environment(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow_login(monkeypatch, tmp_path, 3)
    async with penguin.Environment.open(penguin.EnvironmentConfig(workspace_dir=workspace)) as env:
        interrupt = trio.Event()
        args = {"description": "t", "cmd": "touch started"}
        with trio.fail_after(2):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(partial(call, env, "exec_command", args, interrupt=interrupt))
                await trio.sleep(0.2)
                interrupt.set()
        # A background launch never waits: registered at once, started when ready.
        out = await exec_command(env, "touch later", run_in_background=True)
        process_id = process_id_in(out.output)
        assert registered(env)[process_id].pid is None
        with trio.fail_after(10):
            report = await env.background_reports.receive()
        assert (report.id, report.status) == (process_id, "completed")
    assert not (workspace / "started").exists()
    assert (workspace / "later").exists()
