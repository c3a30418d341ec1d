"""``penguin tool``: one call through a real Environment, run as a real process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import trio


async def penguin(*args: str, cwd: Path, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        [sys.executable, "-m", "penguin", *args],
        cwd=cwd,
        stdin=stdin,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )


async def test_read_file_streams_the_output_and_exits_0(tmp_path: Path) -> None:
    await trio.Path(tmp_path / "notes.txt").write_text("alpha\nbeta\n")
    done = await penguin("tool", "read_file", '{"file_path": "notes.txt"}', cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "     1\talpha\n     2\tbeta\n"


async def test_workspace_option_and_arguments_from_stdin(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    await trio.Path(workspace).mkdir()
    done = await penguin(
        "tool",
        "write_file",
        "-",
        "--workspace",
        str(workspace),
        cwd=tmp_path,
        stdin=b'{"file_path": "sub/new.txt", "content": "hi\\n"}',
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == 'Created "sub/new.txt" (1 line, 3 bytes).\n'
    assert await trio.Path(workspace / "sub" / "new.txt").read_text() == "hi\n"


async def test_a_failed_call_exits_1_with_the_models_message(tmp_path: Path) -> None:
    done = await penguin("tool", "read_file", '{"file_path": "missing.txt"}', cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout.decode().startswith('File not found: "missing.txt".')


async def test_unknown_tool_gets_the_same_message_the_model_would(tmp_path: Path) -> None:
    done = await penguin("tool", "nope", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout.decode() == "Unknown tool: nope\n"


async def test_bad_json_gets_the_same_message_the_model_would(tmp_path: Path) -> None:
    done = await penguin("tool", "read_file", "{oops", cwd=tmp_path)
    assert done.returncode == 1
    out = done.stdout.decode()
    assert out.startswith('Tool call "read_file" failed: the arguments are not valid JSON (')
    assert out.endswith("Re-issue the call with one complete, valid JSON object.\n")


async def test_list_shows_the_tools(tmp_path: Path) -> None:
    done = await penguin("tool", "--list", cwd=tmp_path)
    assert done.returncode == 0
    names = [line.split()[0] for line in done.stdout.decode().splitlines()]
    assert names[:3] == ["read_file", "edit_file", "write_file"]


async def test_missing_workspace_is_a_clear_error(tmp_path: Path) -> None:
    done = await penguin("tool", "read_file", "{}", "--workspace", "nowhere", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr == b"penguin tool: workspace 'nowhere' does not exist\n"
    assert done.stdout == b""


async def test_no_tool_name_is_a_usage_error(tmp_path: Path) -> None:
    done = await penguin("tool", cwd=tmp_path)
    assert done.returncode == 1
    assert b"give a tool NAME" in done.stderr


async def test_no_command_prints_help(tmp_path: Path) -> None:
    done = await penguin(cwd=tmp_path)
    assert done.returncode == 1
    assert b"usage: penguin" in done.stderr


async def test_ctrl_c_interrupts_the_call_and_leaves_nothing_running(tmp_path: Path) -> None:
    args = (
        '{"description": "wait", "cmd": "echo ready $PENGUIN_OWNER; sleep 30", '
        '"yield_time_ms": 60000}'
    )
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "penguin", "tool", "exec_command", args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    output = b""
    with trio.fail_after(30):
        while b"\n" not in output:
            output += await process.stdout.receive_some()
        process.send_signal(signal.SIGINT)
        async for chunk in process.stdout:
            output += chunk
        code = await process.wait()
    owner = output.decode().split("\n", 1)[0].removeprefix("ready ")
    assert code == 1
    assert output.decode() == f"ready {owner}\n\n[interrupted: tool aborted by user]\n"
    assert [p for p in psutil.process_iter() if _alive_with_owner(p, owner)] == []


def _alive_with_owner(process: psutil.Process, owner: str) -> bool:
    try:
        return (
            process.environ().get("PENGUIN_OWNER") == owner
            and process.status() != psutil.STATUS_ZOMBIE
        )
    except psutil.Error:
        return False


async def test_9_7_a_call_opens_only_its_own_tool(tmp_path: Path) -> None:
    """Only exec_command pays for the login environment: read_file never runs the probe."""
    home = tmp_path / "home"
    home.mkdir()
    probed = tmp_path / "probed"
    (home / ".bash_profile").write_text(f"echo x >> {probed}\n")
    env = {**os.environ, "HOME": str(home)}
    env.pop("PENGUIN_SHELL", None)

    async def tool(*args: str) -> subprocess.CompletedProcess[bytes]:
        return await trio.run_process(
            [sys.executable, "-m", "penguin", "tool", *args],
            cwd=tmp_path,
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )

    (tmp_path / "notes.txt").write_text("alpha\n")
    done = await tool("read_file", '{"file_path": "notes.txt"}')
    assert done.returncode == 0, done.stderr
    assert not probed.exists()
    done = await tool("exec_command", '{"description": "d", "cmd": "echo hi"}')
    assert done.stdout.decode() == "hi\n", done.stderr
    assert probed.exists()  # the probe read the profile, so the check above could fail
