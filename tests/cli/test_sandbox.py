"""``penguin sandbox`` and the sandbox options of the other subcommands (X1.3, X3.1, X3.2).

Real ``penguin`` processes. Where the machine cannot enforce a sandbox the tests that
need it skip with the reason; a ``PATH`` without ``bwrap`` shows what such a machine gets.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

from penguin.environment.sandbox import probe

REASON = probe().reason
kernel = pytest.mark.skipif(REASON is not None, reason=f"sandbox unavailable here: {REASON}")
NO_BWRAP = "bubblewrap (bwrap) is not installed"


def penguin(
    *args: str, cwd: Path, path: str | None = None, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = path
    if home is not None:
        env["PENGUIN_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "penguin", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@kernel
def test_x3_2_check_reports_what_the_machine_supports(tmp_path: Path) -> None:
    done = penguin("sandbox", "--check", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "network isolation: yes" in done.stdout.splitlines()
    assert "workspace-write: supported" in done.stdout.splitlines()


@kernel
def test_x3_2_exits_with_the_commands_status(tmp_path: Path) -> None:
    assert penguin("sandbox", "--", "sh", "-c", "exit 3", cwd=tmp_path).returncode == 3
    killed = penguin("sandbox", "--", "sh", "-c", "kill -TERM $$", cwd=tmp_path)
    assert killed.returncode == 128 + 15
    assert penguin("sandbox", "--mode", "off", "--", "true", cwd=tmp_path).returncode == 0
    usage = penguin("sandbox", cwd=tmp_path)
    assert (usage.returncode, usage.stderr) == (
        1,
        "penguin sandbox: give a command after -- (or --check)\n",
    )


@kernel
def test_x3_2_the_workspace_is_the_cwd_and_read_only_writes_nowhere(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    script = f"pwd; touch inside; touch {outside}/x"
    done = penguin("sandbox", "--workspace", str(workspace), "--", "sh", "-c", script, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, f"{workspace}\n")
    assert (workspace / "inside").exists()
    assert (outside / "x").exists()  # under /tmp, a writable root by default (X1.2)
    read_only = penguin(
        "sandbox",
        "--mode",
        "read-only",
        "--",
        "sh",
        "-c",
        f"touch y; touch {outside}/z",
        cwd=workspace,
    )
    assert read_only.returncode == 1
    assert read_only.stderr.count("Read-only file system") == 2
    assert not (workspace / "y").exists()
    assert not (outside / "z").exists()


@kernel
def test_x3_2_no_network_reaches_no_listener(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        script = f"exec 3<>/dev/tcp/127.0.0.1/{port}"
        off = penguin("sandbox", "--no-network", "--", "bash", "-c", script, cwd=tmp_path)
        with pytest.raises(BlockingIOError):
            listener.accept()
        on = penguin("sandbox", "--", "bash", "-c", script, cwd=tmp_path)
        conn, _ = listener.accept()
        conn.close()
    assert (off.returncode, on.returncode) == (1, 0)


def test_x3_1_refusal_and_check_without_bwrap(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    refused = penguin("sandbox", "--", "true", cwd=tmp_path, path=str(empty))
    assert (refused.returncode, refused.stderr) == (
        1,
        f"sandbox unavailable: {NO_BWRAP}; use --sandbox off to run without it\n",
    )
    check = penguin("sandbox", "--check", cwd=tmp_path, path=str(empty))
    assert check.returncode == 1
    assert f"sandbox unavailable: {NO_BWRAP}" in check.stdout.splitlines()
    tool = penguin(
        "tool",
        "--sandbox",
        "read-only",
        "read_file",
        '{"file_path": "a"}',
        cwd=tmp_path,
        path=str(empty),
    )
    assert (tool.returncode, tool.stderr) == (
        1,
        f"sandbox unavailable: {NO_BWRAP}; use --sandbox off to run without it\n",
    )


def test_x3_1_run_refuses_a_chosen_mode_and_warns_for_the_default(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    home = tmp_path / "home"
    chosen = penguin(
        "run", "-m", "hi", "--sandbox", "read-only", cwd=tmp_path, path=str(empty), home=home
    )
    assert (chosen.returncode, chosen.stderr) == (
        1,
        f"sandbox unavailable: {NO_BWRAP}; use --sandbox off to run without it\n",
    )
    default = penguin("run", "-m", "hi", cwd=tmp_path, path=str(empty), home=home)
    lines = default.stderr.splitlines()
    assert lines[:2] == [
        f"penguin: sandbox unavailable: {NO_BWRAP}; running without it",
        "[sandbox: off, network on]",
    ]


@kernel
def test_x1_4_run_says_the_policy_before_the_task(tmp_path: Path) -> None:
    done = penguin("run", "-m", "hi", "--no-network", cwd=tmp_path, home=tmp_path / "home")
    assert done.stderr.splitlines()[0] == "[sandbox: workspace-write, network off]"


@kernel
def test_x2_2_tool_under_a_sandbox(tmp_path: Path) -> None:
    boxed = penguin(
        "tool",
        "--sandbox",
        "read-only",
        "write_file",
        '{"file_path": "a.txt", "content": "x"}',
        cwd=tmp_path,
    )
    assert (boxed.returncode, boxed.stdout) == (
        1,
        'Cannot write "a.txt": outside the sandbox\'s writable roots (read-only).\n',
    )
    default = penguin("tool", "write_file", '{"file_path": "a.txt", "content": "x"}', cwd=tmp_path)
    assert default.returncode == 0  # off by default for penguin tool
    assert (tmp_path / "a.txt").read_text() == "x"


@kernel
def test_c5_5_a_resumed_chat_keeps_the_recorded_policy_or_names_the_change(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from penguin.cli._sandbox import resumed_policy

    recorded = {"mode": "read-only", "network": False}
    kept = resumed_policy(Namespace(sandbox=None, network=None), recorded, None, prog="p")
    assert kept.summary() == recorded
    assert capsys.readouterr().err == ""
    changed = resumed_policy(
        Namespace(sandbox="workspace-write", network=None), recorded, None, prog="p"
    )
    assert changed.summary() == {"mode": "workspace-write", "network": False}
    assert capsys.readouterr().err == (
        "sandbox: read-only, network off -> workspace-write, network off\n"
    )
    none = resumed_policy(Namespace(sandbox=None, network=None), None, None, prog="p")
    assert none.summary() == {"mode": "off", "network": True}
