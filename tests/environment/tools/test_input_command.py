"""input_command (reference 3.3, 4.4, 4.5) through a real Environment and real processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import penguin
from penguin import protocol as om

from ..processes import (
    alive,
    call,
    command_tools,
    env_processes,
    exec_command,
    has_exited,
    input_command,
    kill_command,
    launch,
    pid_of,
    process_id_in,
    registered,
    start_in_background,
    still_running_note,
    wait_gone,
    wait_until,
)

pytestmark = pytest.mark.usefixtures("hermetic_home", "no_stray_processes")

MIXED_CTRL_C = (
    "[input_command error: chars mixes U+0003 (Ctrl-C) with other content; "
    'send "\\u0003" alone to interrupt]'
)


def unknown(process_id: str) -> str:
    return (
        f"[input_command error: unknown process_id {process_id} "
        "(the session may have exited and been cleared)]"
    )


# ---------------------------------------------------------------------------- 3.3.1


@pytest.mark.parametrize("args", [{}, {"process_id": ""}, {"process_id": 5}])
async def test_3_3_1_missing_process_id(env: penguin.Environment, args: dict[str, Any]) -> None:
    out = await call(env, "input_command", {"description": "t", "chars": "x", **args})
    assert out.output == 'Missing required argument "process_id" for input_command.'
    assert out.stop_reason == "failed"


async def test_3_3_1_unknown_process_id(env: penguin.Environment) -> None:
    out = await input_command(env, "proc-12345678", "x")
    assert (out.output, out.stop_reason) == (unknown("proc-12345678"), "failed")


# ---------------------------------------------------------------------------- 3.3.2-3.3.4


async def test_3_3_2_poll_default(workspace: Path) -> None:
    # The defaults (poll 120 s, write 250 ms) are clamped a second below the tool's
    # timeout: with a 3 s timeout a poll window is 2000 ms and a write window 250 ms.
    config = penguin.EnvironmentConfig(
        workspace_dir=workspace, tools=command_tools(input_command={"timeout_ms": 3000})
    )
    async with penguin.Environment.open(config) as env:
        process_id = await start_in_background(env, 'read a; echo "got $a"; read b')

        async def timed(chars: object) -> tuple[float, om.ToolCallOutputPayload]:
            started = time.monotonic()
            args: dict[str, object] = {"description": "t", "process_id": process_id}
            if chars is not None:
                args["chars"] = chars
            out = await call(env, "input_command", args)
            return time.monotonic() - started, out

        for chars in (None, "", 5):  # absent, empty, non-string: all a poll, nothing written
            elapsed, out = await timed(chars)
            assert out.output == still_running_note(process_id)
            assert elapsed >= 1.95  # the poll window, clamped to 2000 ms by the timeout
        elapsed, out = await timed("x\n")
        assert out.output == "got x\n\n" + still_running_note(process_id)
        assert 0.2 <= elapsed < 1.5  # the 250 ms write window, far from the poll's
        await kill_command(env, process_id)


async def test_3_3_3_chars_are_written_verbatim(env: penguin.Environment) -> None:
    process_id = await start_in_background(env, "cat")
    out = await input_command(env, process_id, "a\nb")  # no newline added
    assert (out.output, out.stop_reason) == ("a\nb\n" + still_running_note(process_id), "completed")
    out = await input_command(env, process_id, "ünï ✓")
    assert out.output == "ünï ✓\n" + still_running_note(process_id)
    await kill_command(env, process_id)


async def test_3_3_3_ctrl_c_sends_sigint_to_group(env: penguin.Environment) -> None:
    # bash waits for its pipeline: only a SIGINT to every member ends the command.
    process_id = await start_in_background(env, "sleep 1000 | sleep 1000")
    pids = [p.pid for p in env_processes(env)]
    assert len(pids) == 3
    out = await input_command(env, process_id, "\u0003")
    assert (out.output, out.stop_reason) == ("[terminated by signal SIGINT]", "failed")
    await wait_gone(pids)
    assert env.list_background_commands() == []


async def test_3_3_3_ignored_sigint_keeps_the_command_running(env: penguin.Environment) -> None:
    process_id = await start_in_background(env, "trap '' INT; : > armed; sleep 1000")
    await wait_until((env.workspace_dir / "armed").exists)  # a SIGINT before the trap kills
    out = await input_command(env, process_id, "\u0003")
    assert (out.output, out.stop_reason) == (still_running_note(process_id), "completed")
    assert registered(env)[process_id].running
    out = await kill_command(env, process_id)
    assert out.stop_reason == "completed"


async def test_3_3_3_mixed_ctrl_c_rejected(env: penguin.Environment) -> None:
    process_id = await start_in_background(env, 'read line; echo "got $line"')
    for chars in ("x\u0003y\n", "\u0003\u0003", "\u0003\n"):
        out = await input_command(env, process_id, chars)
        assert (out.output, out.stop_reason) == (MIXED_CTRL_C, "failed")
    assert registered(env)[process_id].running  # no signal
    out = await input_command(env, process_id, "ok\n")
    assert (out.output, out.stop_reason) == ("got ok\n", "completed")  # nothing was written


async def test_3_3_3_closed_stdin_is_ignored(env: penguin.Environment) -> None:
    process_id, first = await launch(env, "exec 0<&-; echo closed; sleep 1000")
    assert first == "closed\n"
    for _ in range(2):
        out = await input_command(env, process_id, "hello\n")
        assert (out.output, out.stop_reason) == (still_running_note(process_id), "completed")
    await kill_command(env, process_id)


@pytest.mark.parametrize("tty", [False, True])
async def test_3_3_3_a_command_that_never_reads_cannot_block_the_call(
    env: penguin.Environment, tty: bool
) -> None:
    process_id = await start_in_background(env, "sleep 1000", tty=tty)
    with trio.fail_after(5):
        for _ in range(2):  # far more than a pipe or a terminal buffers
            out = await input_command(env, process_id, "x" * 300_000)
            assert out.output.endswith(still_running_note(process_id))
        out = await kill_command(env, process_id)
    assert out.stop_reason == "completed"


# ---------------------------------------------------------------------------- 3.3.5-3.3.7


async def test_3_3_5_abort_does_not_kill(env: penguin.Environment) -> None:
    process_id = await start_in_background(env, 'read line; echo "got $line"')
    pid = await pid_of(env, process_id)
    interrupt = trio.Event()
    request = om.tool_call("input_command", {"description": "t", "process_id": process_id}, "c1")
    outputs = []
    with trio.fail_after(10):
        async with env.execute_tool(request, interrupt=interrupt) as stream:
            async for message in stream:
                if isinstance(message.payload, om.PartialToolCallOutputPayload):
                    interrupt.set()  # the poll (default window 120 s) is under way
                elif isinstance(message.payload, om.ToolCallOutputPayload):
                    outputs.append(message.payload)
    assert [(o.output, o.stop_reason) for o in outputs] == [
        ("[interrupted: tool aborted by user]", "aborted")
    ]
    out = await call(
        env,
        "input_command",
        {"description": "t", "process_id": process_id, "chars": "x\n"},
        interrupt=interrupt,  # already set: aborted at once
    )
    assert out.stop_reason == "aborted"
    assert registered(env)[process_id].running
    assert alive(pid)
    out = await input_command(env, process_id, "still here\n")
    assert (out.output, out.stop_reason) == ("got still here\n", "completed")


async def test_3_3_7_exited_session_is_removed(env: penguin.Environment) -> None:
    process_id = await start_in_background(env, "read x; echo bye; exit 3")
    out = await input_command(env, process_id, "\n")
    assert (out.output, out.stop_reason) == ("bye\n\n[exit code: 3]", "failed")
    assert env.list_background_commands() == []
    out = await input_command(env, process_id)
    assert (out.output, out.stop_reason) == (unknown(process_id), "failed")


async def test_3_3_7_exit_between_calls_then_poll_reaps_the_group(
    env: penguin.Environment,
) -> None:
    go = env.workspace_dir / "go"
    cmd = "while [ ! -e go ]; do sleep 0.01; done; sleep 1000 & echo $!; exit 0"
    process_id = await start_in_background(env, cmd)
    go.touch()
    await wait_until(has_exited(env, process_id))
    out = await input_command(env, process_id)
    assert out.stop_reason == "completed"
    stray = int(out.output)  # the output produced between calls waited in the buffer
    assert process_id not in registered(env)
    await wait_gone([stray])


# ---------------------------------------------------------------------------- 4.4, 4.5


async def test_4_4_drop_tally_in_delivered_output(workspace: Path) -> None:
    config = penguin.EnvironmentConfig(
        workspace_dir=workspace, tools=command_tools(input_command={"max_output_length": 0})
    )
    async with penguin.Environment.open(config) as env:
        cmd = (
            "while [ ! -e go ]; do sleep 0.01; done; "
            r"head -c 1200000 /dev/zero | tr '\0' x; echo; echo END"
        )
        process_id = await start_in_background(env, cmd)
        (workspace / "go").touch()
        await wait_until(has_exited(env, process_id))  # nobody read the 1.2 M chars
        out = await input_command(env, process_id)
    total = 1_200_000 + len("\nEND\n")
    dropped = total - 1_048_576
    expected = f"[... {dropped} chars of earlier output dropped ...]\n" + "x" * (1_048_576 - 5)
    assert out.output == expected + "\nEND\n"
    assert out.stop_reason == "completed"


async def test_4_5_each_chunk_delivered_once(env: penguin.Environment) -> None:
    workspace = env.workspace_dir
    cmd = (
        "echo first; while [ ! -e go ]; do sleep 0.01; done; "
        "echo second; touch printed; read x; echo third; read y; echo fourth $x $y"
    )
    process_id, first = await launch(env, cmd)
    delivered = [first]
    (workspace / "go").touch()
    await wait_until(lambda: (workspace / "printed").exists())
    out = await input_command(env, process_id, yield_time_ms=250)  # output made between calls
    delivered.append(out.output.removesuffix(still_running_note(process_id)))
    out = await input_command(env, process_id, "a\n")
    delivered.append(out.output.removesuffix(still_running_note(process_id)))
    out = await input_command(env, process_id, "b\n")
    assert out.stop_reason == "completed"
    delivered.append(out.output)
    assert delivered == ["first\n", "second\n\n", "third\n\n", "fourth a b\n"]
    assert "".join(delivered).replace("\n\n", "\n") == "first\nsecond\nthird\nfourth a b\n"


async def test_4_5_output_after_a_poll_window_is_kept_for_the_next_call(
    env: penguin.Environment,
) -> None:
    process_id = await start_in_background(env, "read x; echo $x; read y; echo $y")
    out = await input_command(env, process_id, "one\n")
    assert out.output == "one\n\n" + still_running_note(process_id)
    out = await exec_command(env, "true")  # another call in between changes nothing
    out = await input_command(env, process_id, "two\n")
    assert re.fullmatch("two\n", out.output), out.output


# ---------------------------------------------------------------------------- issue 9, item 5


@pytest.fixture
def busy_cores() -> Iterator[int]:
    """Every core kept busy by a CPU burner while the test runs; always killed after."""
    burners: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(os.cpu_count() or 1):
            burners.append(
                subprocess.Popen(
                    [sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL
                )
            )
        yield len(burners)
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.wait()


@pytest.mark.parametrize("start", ["run_in_background", "window"])
async def test_9_5_ctrl_c_on_a_fresh_environment_under_load_ends_by_sigint(
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    busy_cores: int,
    start: str,
) -> None:
    # The Ctrl-C used to be lost when it reached a command whose shell had not started
    # the command yet. Both ways to be early, made slow enough to hit every time:
    # - a login profile that takes 0.3 s: a background launch is registered at once
    #   and its process only exists after the probe;
    # - start-up code in the command's own shell: Debian's bash reads ~/.bashrc for
    #   `bash -c` when SSH_CLIENT is set, and a SIGINT that comes while bash waits for
    #   a child of it that survives the signal is swallowed (the command then runs).
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bash_profile").write_text("sleep 0.3\n")
    (home / ".bashrc").write_text("sh -c 'trap \"\" INT; sleep 0.5'\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SSH_CLIENT", "192.0.2.1 50000 22")
    assert busy_cores >= 1
    for _ in range(3):
        config = penguin.EnvironmentConfig(workspace_dir=workspace)
        async with penguin.Environment.open(config) as env:
            if start == "window":
                process_id = await start_in_background(env, "sleep 30")
            else:
                out = await exec_command(env, "sleep 30", run_in_background=True)
                process_id = process_id_in(out.output)
            began = time.monotonic()
            out = await input_command(env, process_id, "\u0003", yield_time_ms=5000)
            elapsed = time.monotonic() - began
            assert (out.output, out.stop_reason) == ("[terminated by signal SIGINT]", "failed")
            assert elapsed < 2.5, elapsed  # well within the 5 s window
            assert env.list_background_commands() == []
